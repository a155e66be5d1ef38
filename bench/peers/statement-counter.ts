// A TCP proxy in front of PostgreSQL that counts what clients send: connections, and statements
// as the wire protocol carries them (each simple Query and each extended-protocol Execute). The
// server's own counters (pg_stat_database) reach their view only when a backend flushes them,
// which a backend busy every few hundred milliseconds may put off for up to a minute.
import { type AddressInfo, connect, createServer, type Socket } from "node:net";

/** The startup packet's codes for requests that are not a startup (no typed messages follow them yet). */
const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
const QUERY = 0x51; // 'Q'
const EXECUTE = 0x45; // 'E'

export interface StatementCounts {
  connections: number;
  statements: number;
}

/** Reads the client → server byte stream message by message, without keeping message bodies. */
class FrontendParser {
  #startup = true;
  #header = Buffer.alloc(0);
  #skip = 0;
  readonly #counts: StatementCounts;

  constructor(counts: StatementCounts) {
    this.#counts = counts;
  }

  push(chunk: Buffer): void {
    let offset = 0;
    while (offset < chunk.length) {
      if (this.#skip > 0) {
        const taken = Math.min(this.#skip, chunk.length - offset);
        this.#skip -= taken;
        offset += taken;
        continue;
      }
      // Startup messages have no type byte: length then code. Typed ones: type then length.
      const need = this.#startup ? 8 : 5;
      const taken = Math.min(need - this.#header.length, chunk.length - offset);
      this.#header = Buffer.concat([this.#header, chunk.subarray(offset, offset + taken)]);
      offset += taken;
      if (this.#header.length < need) return;
      if (this.#startup) {
        const length = this.#header.readInt32BE(0);
        const code = this.#header.readInt32BE(4);
        if (code !== SSL_REQUEST && code !== GSSENC_REQUEST) this.#startup = false;
        this.#skip = length - 8;
      } else {
        const type = this.#header[0];
        if (type === QUERY || type === EXECUTE) this.#counts.statements++;
        this.#skip = this.#header.readInt32BE(1) - 4;
      }
      this.#header = Buffer.alloc(0);
    }
  }
}

export interface StatementCounter {
  /** The same PostgreSQL URL, pointing at the proxy. */
  url(baseUrl: string): string;
  counts(): StatementCounts;
  close(): Promise<void>;
}

export async function startStatementCounter(targetUrl: string): Promise<StatementCounter> {
  const target = new URL(targetUrl);
  const counts: StatementCounts = { connections: 0, statements: 0 };
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    counts.connections++;
    const upstream = connect(Number(target.port || 5432), target.hostname);
    const parser = new FrontendParser(counts);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on("data", (chunk: Buffer) => {
      parser.push(chunk);
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => client.write(chunk));
    client.on("end", () => upstream.end());
    upstream.on("end", () => client.end());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url(baseUrl) {
      const url = new URL(baseUrl);
      url.hostname = "127.0.0.1";
      url.port = String(port);
      return url.toString();
    },
    counts: () => ({ ...counts }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
