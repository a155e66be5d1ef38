// The node's network: a namespace joined to the host by one veth pair (a /30), with no default
// route, so pods and Services reach only the node, each other and the host's end of the link
// (where the suites' PostgreSQL listens). On the host, a route sends the cluster's range to the
// node (for the API server and ClusterIPs), and a guard in mangle POSTROUTING counts and drops any
// packet of the cluster's range leaving through another interface. It sits in POSTROUTING, not
// filter OUTPUT: there the outgoing interface is the final one; in OUTPUT a DNAT-ed ClusterIP
// packet still carries its pre-DNAT route's.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import {
  CLUSTER_RANGE,
  GUARD_CHAIN,
  HOST_IP,
  HOST_LINK,
  LINK_PREFIX,
  NETNS,
  NODE_IP,
  NODE_LINK,
} from "./layout.ts";

const run = promisify(execFile);

export const inNode = (command: string, args: string[]) =>
  run("ip", ["netns", "exec", NETNS, command, ...args]);

export async function netnsExists(): Promise<boolean> {
  const { stdout } = await run("ip", ["netns", "list"]);
  return stdout.split("\n").some((line) => line.split(" ")[0] === NETNS);
}

export async function createNodeNetwork(): Promise<void> {
  await run("ip", ["netns", "add", NETNS]);
  await run("ip", ["link", "add", HOST_LINK, "type", "veth", "peer", "name", NODE_LINK, "netns", NETNS]);
  await run("ip", ["addr", "add", `${HOST_IP}/${LINK_PREFIX}`, "dev", HOST_LINK]);
  await run("ip", ["link", "set", HOST_LINK, "up"]);
  await inNode("ip", ["addr", "add", `${NODE_IP}/${LINK_PREFIX}`, "dev", NODE_LINK]);
  await inNode("ip", ["link", "set", NODE_LINK, "up"]);
  await inNode("ip", ["link", "set", "lo", "up"]);
  // The node forwards between its pods' bridge and its link; bridged pod-to-Service traffic must
  // pass iptables for kube-proxy's rules (both settings belong to the node's namespace).
  await inNode("sysctl", ["-qw", "net.ipv4.ip_forward=1"]);
  await inNode("sysctl", ["-qw", "net.bridge.bridge-nf-call-iptables=1"]);
  // Pods, Services and the node from the host; the /30 itself stays on the link (more specific).
  await run("ip", ["route", "add", CLUSTER_RANGE, "via", NODE_IP, "dev", HOST_LINK]);
  await installGuard();
}

async function installGuard(): Promise<void> {
  const ipt = (...args: string[]) => run("iptables", ["-w", "-t", "mangle", ...args]);
  await ipt("-N", GUARD_CHAIN);
  await ipt("-A", GUARD_CHAIN, "-o", HOST_LINK, "-j", "RETURN");
  await ipt("-A", GUARD_CHAIN, "-o", "lo", "-j", "RETURN");
  await ipt("-A", GUARD_CHAIN, "-s", CLUSTER_RANGE, "-j", "DROP");
  await ipt("-A", GUARD_CHAIN, "-d", CLUSTER_RANGE, "-j", "DROP");
  await ipt("-I", "POSTROUTING", "1", "-j", GUARD_CHAIN);
}

/** Packets of the cluster's range the guard dropped on their way out of the machine; null without a guard. */
export async function guardDrops(): Promise<number | null> {
  const listed = await run("iptables", ["-w", "-t", "mangle", "-L", GUARD_CHAIN, "-n", "-v", "-x"]).catch(
    () => null,
  );
  if (!listed) return null;
  return listed.stdout
    .split("\n")
    .filter((line) => /\bDROP\b/.test(line))
    .reduce((sum, line) => sum + Number(line.trim().split(/\s+/)[0]), 0);
}

/** Removes what createNodeNetwork made; each step tolerates a part never made. */
export async function removeNodeNetwork(): Promise<void> {
  const quiet = (p: Promise<unknown>) => p.catch(() => undefined);
  await quiet(run("iptables", ["-w", "-t", "mangle", "-D", "POSTROUTING", "-j", GUARD_CHAIN]));
  await quiet(run("iptables", ["-w", "-t", "mangle", "-F", GUARD_CHAIN]));
  await quiet(run("iptables", ["-w", "-t", "mangle", "-X", GUARD_CHAIN]));
  // Deleting the namespace deletes its interfaces (the veth's host end with them, and its route)
  // and its iptables rules, kube-proxy's included.
  if (await netnsExists()) await run("ip", ["netns", "delete", NETNS]);
  await quiet(run("ip", ["link", "delete", HOST_LINK]));
}
