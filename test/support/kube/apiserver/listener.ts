import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { Socket } from "node:net";

const KUBE_APISERVER_IDLE_TIMEOUT_MS = 90_000;

export type DownMode = "refuse" | "reset";

/**
 * The node:http server plus what tests need from the network: every socket tracked (so close() leaves
 * nothing behind), and a way to go down and come back on the same port.
 */
export class Listener {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #port = 0;
  #resetting = false;
  #listening = false;

  /** With `tls`, HTTPS (the proxy in front of the real API server serves its certificate). */
  constructor(
    handler: (request: IncomingMessage, response: ServerResponse) => void,
    tls?: { cert: Buffer; key: Buffer },
  ) {
    // kube-apiserver closes a connection idle for 90 s (IdleTimeout in k8s.io/apiserver's
    // secure_serving.go); node:http's default of 5 s made a client open a fresh TLS connection
    // after any pause of a few seconds, as no client of the real server does.
    const options = { keepAliveTimeout: KUBE_APISERVER_IDLE_TIMEOUT_MS };
    this.#server = tls ? createTlsServer({ ...options, ...tls }, handler) : createServer(options, handler);
    this.#server.on("connection", (socket: Socket) => {
      if (this.#resetting) {
        socket.resetAndDestroy();
        return;
      }
      this.#sockets.add(socket);
      socket.on("close", () => this.#sockets.delete(socket));
    });
  }

  get port(): number {
    return this.#port;
  }

  async listen(port: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      const onError = (error: Error) => reject(error);
      this.#server.once("error", onError);
      this.#server.listen(port, "127.0.0.1", () => {
        this.#server.off("error", onError);
        resolve();
      });
    });
    this.#listening = true;
    const address = this.#server.address();
    if (address === null || typeof address === "string")
      throw new Error("the test API server has no TCP address");
    this.#port = address.port;
  }

  #resetAll(): void {
    for (const socket of this.#sockets) socket.resetAndDestroy();
    this.#sockets.clear();
  }

  /**
   * "refuse": the port is closed (ECONNREFUSED); "reset": it accepts and resets every connection.
   * Either way the open connections, watches and held requests included, are reset.
   */
  async goDown(mode: DownMode): Promise<void> {
    if (mode === "reset") {
      this.#resetting = true;
      this.#resetAll();
      return;
    }
    if (!this.#listening) return;
    this.#listening = false;
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#resetAll();
    await closed;
  }

  async comeBack(): Promise<void> {
    this.#resetting = false;
    if (!this.#listening) await this.listen(this.#port);
  }

  async close(): Promise<void> {
    this.#resetting = false;
    const closed = this.#listening
      ? new Promise<void>((resolve) => this.#server.close(() => resolve()))
      : Promise.resolve();
    this.#listening = false;
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    await closed;
  }
}
