// A TCP proxy in front of PostgreSQL that cuts, blackholes or slows the link on command,
// so tests see what a replica sees when its network misbehaves, without root or iptables.
//
// Semantics of the faults:
// - cut(): every open connection is reset on both sides (RST, not FIN), and new ones are
//   accepted then reset at once, until heal(). Clients fail fast with ECONNRESET.
// - blackhole(): connections stay open but nothing is forwarded either way; bytes that
//   arrive (and bytes still held by a delay) are dropped, FINs and resets included, like
//   packets into a dead route: a client that gives up leaves its PostgreSQL session (and
//   its locks) alive until heal(). New connections are accepted but never connected.
//   heal() then resets every blackholed connection: bytes were lost mid-protocol, so the
//   only safe outcome is that the client notices and reconnects, never that it resumes on
//   a desynchronised stream. A pool that ends during a blackhole waits until heal/close.
// - delay(ms): each chunk is held ms before it is written, in both directions, in order;
//   a later shorter delay never overtakes bytes already held. delay(0) removes it.
// - heal(): all faults off (delay included): plain forwarding for new and open connections.
// - moveTo(target): new connections go to another server, open ones are reset, as a proxy in
//   front of a primary does on failover (the old server is gone or no longer the primary).
import { type AddressInfo, connect, createServer, type Socket } from "node:net";

export type FaultMode = "forwarding" | "cut" | "blackhole";

export interface FaultProxyStats {
  mode: FaultMode;
  delayMs: number;
  /** Client connections accepted since start, refused ones included. */
  connections: number;
  /** Client connections open now. */
  activeConnections: number;
  /** Connections reset on accept because the link was cut. */
  refusedConnections: number;
  bytesToTarget: number;
  bytesToClient: number;
  /** Bytes held by a delay right now, both directions. */
  bytesHeld: number;
  /** Bytes swallowed by a blackhole, or held by a delay when the link broke. */
  bytesDropped: number;
}

export interface FaultProxy {
  readonly host: "127.0.0.1";
  readonly port: number;
  /** The same PostgreSQL URL with host and port pointing at the proxy. */
  url(baseUrl: string): string;
  cut(): void;
  blackhole(): void;
  delay(ms: number): void;
  /**
   * Black-holes only the open connections whose first bytes from the client (a PostgreSQL startup
   * packet, with its application_name) contain `marker`; their heal() resets them, as heal() does.
   */
  blackholeMatching(marker: string): { count: number; heal(): void };
  heal(): void;
  moveTo(target: { host: string; port: number }): void;
  stats(): FaultProxyStats;
  close(): Promise<void>;
}

// Past this many held bytes a direction stops reading its source, so a slow or delayed
// destination pushes back on the sender instead of growing memory without bound.
const HELD_BYTES_HIGH_WATER = 1024 * 1024;

type Counters = Pick<FaultProxyStats, "bytesToTarget" | "bytesToClient" | "bytesHeld" | "bytesDropped">;

interface Held {
  chunk: Buffer | null; // null: the source ended, end the destination after what came before
  dueAt: number;
}

/** RST where the kernel allows it, else a plain close; always ends with "close". */
export function resetSocket(socket: Socket): void {
  if (socket.destroyed) return;
  // A socket still connecting has no connection to reset. Nor has one whose FIN is still
  // queued (end() called, shutdown not done): libuv refuses with EINVAL and Node then never
  // closes the handle nor emits "close", leaking it.
  if (socket.connecting || (socket.writableEnded && !socket.writableFinished)) socket.destroy();
  else socket.resetAndDestroy();
}

// One direction of a proxied connection: source → (optional delay) → destination.
class Link {
  readonly #source: Socket;
  readonly #destination: Socket;
  readonly #delayMs: () => number;
  readonly #counters: Counters;
  readonly #delivered: "bytesToTarget" | "bytesToClient";
  #held: Held[] = [];
  #heldBytes = 0;
  #timer: NodeJS.Timeout | undefined;
  #waitingForDrain = false;
  sourceEnded = false;
  destinationEnded = false;

  constructor(
    source: Socket,
    destination: Socket,
    delayMs: () => number,
    counters: Counters,
    delivered: "bytesToTarget" | "bytesToClient",
  ) {
    this.#source = source;
    this.#destination = destination;
    this.#delayMs = delayMs;
    this.#counters = counters;
    this.#delivered = delivered;
  }

  push(chunk: Buffer | null): void {
    if (chunk === null) this.sourceEnded = true;
    const delayMs = this.#delayMs();
    if (delayMs === 0 && this.#held.length === 0 && !this.#waitingForDrain) {
      this.#write(chunk);
      return;
    }
    this.#held.push({ chunk, dueAt: performance.now() + delayMs });
    this.#hold(chunk?.length ?? 0);
    if (this.#heldBytes > HELD_BYTES_HIGH_WATER) this.#source.pause();
    if (this.#timer === undefined) this.#pump();
  }

  /** Forgets every held byte, as a broken link would. */
  drop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#counters.bytesDropped += this.#heldBytes;
    this.#hold(-this.#heldBytes);
    this.#held = [];
    if (!this.#source.destroyed) this.#source.resume();
  }

  #pump = (): void => {
    this.#timer = undefined;
    while (!this.#waitingForDrain) {
      const next = this.#held[0];
      if (next === undefined) return;
      // Timers may fire a millisecond early; the injected latency is a lower bound.
      const wait = next.dueAt - performance.now();
      if (wait > 0) {
        this.#timer = setTimeout(this.#pump, Math.ceil(wait));
        return;
      }
      this.#held.shift();
      this.#hold(-(next.chunk?.length ?? 0));
      this.#write(next.chunk);
    }
  };

  #hold(bytes: number): void {
    this.#heldBytes += bytes;
    this.#counters.bytesHeld += bytes;
  }

  #write(chunk: Buffer | null): void {
    if (this.#destination.destroyed) return;
    if (chunk === null) {
      this.destinationEnded = true;
      this.#destination.end();
      return;
    }
    this.#counters[this.#delivered] += chunk.length;
    if (!this.#destination.write(chunk)) {
      this.#waitingForDrain = true;
      this.#destination.once("drain", () => {
        this.#waitingForDrain = false;
        this.#pump();
      });
    }
    if (this.#heldBytes <= HELD_BYTES_HIGH_WATER && this.#source.isPaused()) this.#source.resume();
  }
}

class ProxiedConnection {
  readonly client: Socket;
  readonly upstream: Socket | undefined;
  readonly #toTarget: Link | undefined;
  readonly #toClient: Link | undefined;
  blackholed: boolean;
  /** The first chunk the client sent: for PostgreSQL, its startup packet. */
  firstBytes: Buffer | null = null;

  constructor(client: Socket, upstream: Socket | undefined, delayMs: () => number, counters: Counters) {
    this.client = client;
    this.upstream = upstream;
    this.blackholed = upstream === undefined;
    const dropped = (bytes: number) => {
      counters.bytesDropped += bytes;
    };
    client.on("data", (chunk: Buffer) => {
      this.firstBytes ??= chunk;
      if (this.blackholed || this.#toTarget === undefined) dropped(chunk.length);
      else this.#toTarget.push(chunk);
    });
    client.on("end", () => {
      if (!this.blackholed) this.#toTarget?.push(null);
    });
    if (upstream === undefined) return;
    const toTarget = new Link(client, upstream, delayMs, counters, "bytesToTarget");
    const toClient = new Link(upstream, client, delayMs, counters, "bytesToClient");
    this.#toTarget = toTarget;
    this.#toClient = toClient;
    upstream.on("data", (chunk: Buffer) => {
      if (this.blackholed) dropped(chunk.length);
      else toClient.push(chunk);
    });
    upstream.on("end", () => {
      if (!this.blackholed) toClient.push(null);
    });
    // A side that closed before both directions finished cleanly died: the other side must
    // learn it at once, as it would from a real peer, unless the blackhole swallows the news.
    client.on("close", () => {
      if (!this.blackholed && !(toTarget.sourceEnded && toClient.destinationEnded)) this.reset();
    });
    upstream.on("close", () => {
      if (!this.blackholed && !(toClient.sourceEnded && toTarget.destinationEnded)) this.reset();
    });
  }

  blackhole(): void {
    this.blackholed = true;
    this.#toTarget?.drop();
    this.#toClient?.drop();
  }

  reset(): void {
    this.#toTarget?.drop();
    this.#toClient?.drop();
    resetSocket(this.client);
    if (this.upstream !== undefined) resetSocket(this.upstream);
  }
}

export async function startFaultProxy(initial: { host: string; port: number }): Promise<FaultProxy> {
  let target = { ...initial };
  let mode: FaultMode = "forwarding";
  let delayMs = 0;
  let accepted = 0;
  let refused = 0;
  const counters: Counters = { bytesToTarget: 0, bytesToClient: 0, bytesHeld: 0, bytesDropped: 0 };
  const open = new Set<ProxiedConnection>();
  // Every socket the proxy owns, until its handle is closed: close() waits for all of them.
  const sockets = new Map<Socket, Promise<void>>();
  const own = (socket: Socket): Socket => {
    sockets.set(
      socket,
      new Promise((resolve) =>
        socket.once("close", () => {
          sockets.delete(socket);
          resolve();
        }),
      ),
    );
    // Errors surface as "close" on the other side; an unhandled one would crash the test run.
    socket.on("error", () => {});
    return socket;
  };

  const server = createServer({ allowHalfOpen: true }, (client) => {
    own(client);
    accepted += 1;
    if (mode === "cut") {
      refused += 1;
      resetSocket(client);
      return;
    }
    const upstream =
      mode === "blackhole"
        ? undefined
        : own(connect({ host: target.host, port: target.port, allowHalfOpen: true }));
    const connection = new ProxiedConnection(client, upstream, () => delayMs, counters);
    open.add(connection);
    // Held bytes may still be flowing one way after the client left: keep the connection
    // until both of its sockets closed, so close() can stop its timers.
    const socketsClosed = [client, upstream].map((socket) => (socket ? sockets.get(socket) : undefined));
    void Promise.all(socketsClosed).then(() => open.delete(connection));
  });
  server.on("error", () => {});
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  return {
    host: "127.0.0.1",
    port,
    url(baseUrl) {
      let url: URL;
      try {
        url = new URL(baseUrl);
      } catch {
        throw new Error("fault proxy url(): baseUrl is not a URL; pass postgres://user:pass@host:port/db");
      }
      if (url.searchParams.has("host") || url.searchParams.has("port")) {
        throw new Error(
          "fault proxy url(): baseUrl sets host or port as a query parameter, which would bypass the proxy; remove it",
        );
      }
      url.hostname = "127.0.0.1";
      url.port = String(port);
      return url.toString();
    },
    cut() {
      mode = "cut";
      for (const connection of open) connection.reset();
    },
    blackhole() {
      mode = "blackhole";
      for (const connection of open) connection.blackhole();
    },
    delay(ms) {
      if (!Number.isFinite(ms) || ms < 0) {
        throw new Error(`fault proxy delay(ms): ms must be a finite number >= 0, got ${ms}`);
      }
      delayMs = ms;
    },
    blackholeMatching(marker) {
      const needle = Buffer.from(marker);
      const hit = [...open].filter((c) => !c.blackholed && c.firstBytes?.includes(needle));
      for (const connection of hit) connection.blackhole();
      return {
        count: hit.length,
        heal: () => {
          for (const connection of hit) if (connection.blackholed) connection.reset();
        },
      };
    },
    heal() {
      mode = "forwarding";
      delayMs = 0;
      for (const connection of open) if (connection.blackholed) connection.reset();
    },
    moveTo(next) {
      target = { ...next };
      for (const connection of open) connection.reset();
    },
    stats() {
      return {
        mode,
        delayMs,
        connections: accepted,
        activeConnections: [...open].filter((connection) => !connection.client.destroyed).length,
        refusedConnections: refused,
        ...counters,
      };
    },
    async close() {
      const listenerClosed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const connection of open) connection.reset();
      for (const socket of sockets.keys()) socket.destroy();
      await Promise.all([listenerClosed, ...sockets.values()]);
      // The listener's handle is released in the loop's close phase, after its "close"
      // event: two turns make sure a caller counting active handles sees it gone.
      for (let turn = 0; turn < 2; turn += 1) await new Promise((resolve) => setImmediate(resolve));
    },
  };
}
