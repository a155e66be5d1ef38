import { type CoreV1Event, KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { mutatePod, readEvents, readPod, readPods, removePod, seedPod } from "./direct-access.ts";
import {
  type FailOptions,
  FaultPlan,
  type Hang,
  type HangOptions,
  type LatencyOptions,
  matcherFor,
  type RequestMatcher,
} from "./faults.ts";
import { type DownMode, Listener } from "./listener.ts";
import { normalizeRole, type RoleLike } from "./rbac.ts";
import { createRequestHandler, type RecordedRequest } from "./request-pipeline.ts";
import { isWatch } from "./routes.ts";
import { ObjectStore } from "./store.ts";
import { type DropMode, WatchHub } from "./watch.ts";

export type {
  FailOptions,
  FaultRequest,
  Hang,
  HangOptions,
  LatencyOptions,
  RequestMatcher,
} from "./faults.ts";
export type { DownMode } from "./listener.ts";
export type { RoleLike } from "./rbac.ts";
export type { RecordedRequest } from "./request-pipeline.ts";
export type { DropMode } from "./watch.ts";

export interface FaultControl {
  /** The next `count` (default 1) matching requests get `status` with a Status body. */
  failNext(options: FailOptions): void;
  /** Every matching request waits `ms` first (until clear()). */
  setLatency(options: LatencyOptions): void;
  /** Matching requests get no answer until `release()` (or are reset when the server closes). */
  hang(options?: HangOptions): Hang;
  /** Ends open watches ("reset" by default: the socket is killed). Returns how many were dropped. */
  dropWatches(options?: { match?: RequestMatcher; mode?: DropMode }): number;
  /** Connections are refused ("refuse", the default) or reset ("reset"); open ones are reset. */
  goDown(options?: { mode?: DownMode }): Promise<void>;
  /** Serves again on the same port. */
  comeBack(): Promise<void>;
  /** Removes request faults and releases held requests (the server's up/down state is unchanged). */
  clear(): void;
}

export interface KubeApiServer {
  /** http://127.0.0.1:PORT */
  url: string;
  /** The user RBAC denials name, e.g. `system:serviceaccount:default:pglease`. */
  user: string;
  /** A KubeConfig for this server: plain HTTP (skipTLSVerify, which client-node requires for http:) and a bearer token. */
  kubeConfig(options?: { namespace?: string }): KubeConfig;
  seedPod(pod: V1Pod): V1Pod;
  pod(namespace: string, name: string): V1Pod | undefined;
  pods(namespace: string): V1Pod[];
  mutatePod(namespace: string, name: string, change: (pod: V1Pod) => void): V1Pod;
  deletePod(namespace: string, name: string): void;
  events(namespace: string): CoreV1Event[];
  /** Every request in arrival order; status is filled in when answered. */
  requests: RecordedRequest[];
  clearRequests(): void;
  /** Watches currently streaming. */
  readonly openWatches: number;
  waitForWatches(n?: number): Promise<void>;
  /** The global resourceVersion counter (the last write's). */
  readonly resourceVersion: number;
  faults: FaultControl;
  setRole(role: RoleLike | null): void;
  /** Ends every socket, held requests and watches included. */
  close(): Promise<void>;
}

export interface KubeApiServerOptions {
  /** When given, every request is checked against it (403 otherwise). */
  role?: RoleLike;
  /** 0 (default) picks a free port. */
  port?: number;
  /** Named in 403 messages. */
  user?: string;
  /** The bearer token requests must carry (401 otherwise); kubeConfig() uses it. */
  token?: string;
  /** Changes a watch can resume from (default 1000); an older resourceVersion gets a 410 ERROR event. */
  watchHistory?: number;
}

export async function startKubeApiServer(options: KubeApiServerOptions = {}): Promise<KubeApiServer> {
  const store = new ObjectStore(options.watchHistory);
  const hub = new WatchHub(store);
  const plan = new FaultPlan();
  const log: RecordedRequest[] = [];
  const user = options.user ?? "system:serviceaccount:default:pglease";
  const token = options.token ?? "pglease-test-token";
  let role = options.role ? normalizeRole(options.role) : undefined;
  const listener = new Listener(
    createRequestHandler({ store, hub, faults: plan, log, token, user, role: () => role }),
  );
  await listener.listen(options.port ?? 0);
  const url = `http://127.0.0.1:${listener.port}`;

  const faults: FaultControl = {
    failNext: (o) => plan.failNext(o),
    setLatency: (o) => plan.setLatency(o),
    hang: (o) => plan.hang(o),
    dropWatches: (o = {}) => {
      const matches = matcherFor(o.match);
      return hub.drop((request) => {
        const requestUrl = new URL(request.url ?? "/", url);
        return matches({
          method: request.method ?? "GET",
          path: requestUrl.pathname,
          query: requestUrl.searchParams,
          contentType: request.headers["content-type"],
          watch: isWatch(requestUrl.searchParams),
        });
      }, o.mode ?? "reset");
    },
    goDown: (o = {}) => listener.goDown(o.mode ?? "refuse"),
    comeBack: () => listener.comeBack(),
    clear: () => plan.clear(),
  };

  return {
    url,
    user,
    kubeConfig: ({ namespace = "default" } = {}) => {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: "in-process", server: url, skipTLSVerify: true }],
        users: [{ name: "pglease", token }],
        contexts: [{ name: "in-process", cluster: "in-process", user: "pglease", namespace }],
        currentContext: "in-process",
      });
      return kc;
    },
    seedPod: (pod) => seedPod(store, pod),
    pod: (namespace, name) => readPod(store, namespace, name),
    pods: (namespace) => readPods(store, namespace),
    mutatePod: (namespace, name, change) => mutatePod(store, namespace, name, change),
    deletePod: (namespace, name) => removePod(store, namespace, name),
    events: (namespace) => readEvents(store, namespace),
    requests: log,
    clearRequests: () => {
      log.length = 0;
    },
    get openWatches() {
      return hub.count;
    },
    waitForWatches: (n) => hub.waitForWatches(n),
    get resourceVersion() {
      return store.resourceVersion;
    },
    faults,
    setRole: (next) => {
      role = next ? normalizeRole(next) : undefined;
    },
    close: async () => {
      plan.abandonAll();
      hub.drop(() => true, "end");
      await listener.close();
    },
  };
}
