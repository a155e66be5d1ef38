// The suites' PostgreSQL, reachable from the pods: the run's server listens on the host's loopback
// only, so a plain TCP relay on the host's end of the node's link (HOST_IP) forwards to it. Bytes
// pass through unchanged; a pod's session is a real PostgreSQL session.
import { createConnection, createServer, type Socket } from "node:net";
import { HOST_IP } from "./layout.ts";

export interface PgBridge {
  /** The database URL as the pods must use it (host and port rewritten to the bridge). */
  podUrl: string;
  close(): Promise<void>;
}

export async function bridgePostgres(databaseUrl: string): Promise<PgBridge> {
  const target = new URL(databaseUrl);
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection({ host: target.hostname, port: Number(target.port || 5432) });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      // Either side gone: the other goes too, as a direct connection would.
      socket.on("error", () => undefined);
    }
    client.pipe(upstream).on("close", () => client.destroy());
    upstream.pipe(client).on("close", () => upstream.destroy());
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, HOST_IP, resolve);
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("pg bridge: no port");
  const podUrl = new URL(databaseUrl);
  podUrl.hostname = HOST_IP;
  podUrl.port = String(address.port);
  return {
    podUrl: podUrl.toString(),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
