// Run as a child process by fault-proxy-tcp.test.ts: holds bytes in a 10 s delay and keeps
// an idle connection, closes the proxy, then must exit on its own at once. A socket, timer
// or listener the proxy left behind would keep this process alive.
import { connect, createServer, type Socket } from "node:net";
import { startFaultProxy } from "../support/postgres/fault-proxy.ts";

const target = createServer((socket) => {
  socket.on("error", () => {});
  socket.pipe(socket);
});
await new Promise<void>((resolve) => target.listen(0, "127.0.0.1", resolve));
const address = target.address();
if (typeof address !== "object" || address === null) throw new Error("target has no port");
const proxy = await startFaultProxy({ host: "127.0.0.1", port: address.port });

async function openClient(): Promise<Socket> {
  const socket = connect({ host: "127.0.0.1", port: proxy.port });
  socket.on("error", () => {});
  await new Promise((resolve) => socket.once("connect", resolve));
  return socket;
}

const idle = await openClient();
idle.write("ping");
await new Promise((resolve) => idle.once("data", resolve));
proxy.delay(10_000);
const delayed = await openClient();
delayed.write("held in a delay timer");
while (proxy.stats().bytesHeld === 0) await new Promise((resolve) => setImmediate(resolve));

await proxy.close();
idle.destroy();
delayed.destroy();
target.close();
console.log(JSON.stringify(proxy.stats()));
