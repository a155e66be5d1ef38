// TCP peers for the fault proxy tests: targets that echo, record or half-close, and
// clients the tests provoke resets on.
import { connect, createServer, type Server, type Socket } from "node:net";

export interface Target {
  port: number;
  accepted: Socket[];
  received: Buffer[];
  close(): Promise<void>;
}

// echo: sends back what it reads, ending when the client ends; sink: only records;
// quiet: ends its side at once and keeps reading.
export async function startTarget(kind: "echo" | "sink" | "quiet"): Promise<Target> {
  const accepted: Socket[] = [];
  const received: Buffer[] = [];
  const server: Server = createServer({ allowHalfOpen: true }, (socket) => {
    accepted.push(socket);
    socket.on("error", () => {});
    if (kind === "echo") socket.pipe(socket);
    else if (kind === "quiet") socket.end();
    else socket.on("data", (chunk: Buffer) => received.push(chunk)).on("end", () => socket.end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (typeof address !== "object" || address === null) throw new Error("target has no port");
  return {
    port: address.port,
    accepted,
    received,
    async close() {
      for (const socket of accepted) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const clients: Socket[] = [];

/** Destroys every client socket the helpers opened; for afterEach. */
export function destroyClients(): void {
  for (const socket of clients.splice(0)) socket.destroy();
}

export function openClient(port: number, allowHalfOpen = false): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port, allowHalfOpen });
    clients.push(socket);
    socket.once("connect", () => {
      socket.off("error", reject);
      // Resets are what these tests provoke; the ones a test awaits it listens for itself.
      socket.on("error", () => {});
      resolve(socket);
    });
    socket.once("error", reject);
  });
}

export function readToEnd(socket: Socket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => chunks.push(chunk));
  return new Promise((resolve, reject) => {
    socket.once("end", () => resolve(Buffer.concat(chunks)));
    socket.once("error", reject);
  });
}

export function readBytes(socket: Socket, length: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let got = 0;
  return new Promise((resolve) => {
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      got += chunk.length;
      if (got >= length) {
        socket.off("data", onData);
        resolve(Buffer.concat(chunks));
      }
    };
    socket.on("data", onData);
  });
}

// A refused connection may be reset before or after the client saw it established.
export function refusedConnection(port: number): Promise<NodeJS.ErrnoException> {
  const socket = connect({ host: "127.0.0.1", port });
  clients.push(socket);
  return resetError(socket);
}

export function resetError(socket: Socket): Promise<NodeJS.ErrnoException> {
  return new Promise((resolve) => socket.once("error", resolve));
}

export async function roundTrip(socket: Socket, text: string): Promise<string> {
  const reply = readBytes(socket, text.length);
  socket.write(text);
  return (await reply).toString();
}
