// Records every change of the pods' role label as the API server stores it: a watch stream is
// the server's own ordered change feed (resourceVersion order), so no state, however brief, is
// missed, which polling could not promise. Runs in the chaos process, next to the server.
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import type { LabelChange } from "./history.ts";
import { jsonLine } from "./recorder.ts";

export interface LabelWatch {
  changes: LabelChange[];
  /** The role label of each pod as last seen. */
  roles: Map<string, string | null>;
  close(): void;
}

interface WatchEvent {
  type?: string;
  object?: { metadata?: { name?: string; resourceVersion?: string; labels?: Record<string, string> } };
}

export function watchRoleLabels(options: {
  serverUrl: string;
  token: string;
  namespace: string;
  roleLabel: string;
  /** The server's CA, for https. */
  ca?: Buffer;
}): LabelWatch {
  const changes: LabelChange[] = [];
  const roles = new Map<string, string | null>();
  let lastVersion = "";
  let closed = false;
  let current: ReturnType<typeof httpRequest> | null = null;
  const request = options.serverUrl.startsWith("https:") ? httpsRequest : httpRequest;

  const onEvent = (event: WatchEvent) => {
    const metadata = event.object?.metadata;
    if (!metadata?.name || !metadata.resourceVersion) return;
    lastVersion = metadata.resourceVersion;
    const role = event.type === "DELETED" ? null : (metadata.labels?.[options.roleLabel] ?? null);
    if (roles.has(metadata.name) && roles.get(metadata.name) === role) return;
    roles.set(metadata.name, role);
    changes.push({
      resourceVersion: Number(metadata.resourceVersion),
      time: Date.now(),
      pod: metadata.name,
      role,
    });
  };

  const open = () => {
    if (closed) return;
    // Resuming from the last version seen replays exactly what was missed.
    const from = lastVersion ? `&resourceVersion=${lastVersion}` : "";
    const url = `${options.serverUrl}/api/v1/namespaces/${options.namespace}/pods?watch=true${from}`;
    current = request(
      url,
      { headers: { authorization: `Bearer ${options.token}` }, ...(options.ca ? { ca: options.ca } : {}) },
      (response) => {
        let buffer = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => {
          buffer += chunk;
          let newline = buffer.indexOf("\n");
          while (newline >= 0) {
            const line = buffer.slice(0, newline);
            buffer = buffer.slice(newline + 1);
            const event = jsonLine(line);
            if (event) onEvent(event as WatchEvent);
            newline = buffer.indexOf("\n");
          }
        });
        response.on("end", () => setTimeout(open, 10));
        response.on("error", () => {});
      },
    );
    current.on("error", () => setTimeout(open, 50));
    current.end();
  };
  open();

  return {
    changes,
    roles,
    close() {
      closed = true;
      current?.destroy();
    },
  };
}
