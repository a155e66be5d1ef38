// The cluster's certificates: one CA, the API server's serving certificate (valid for the node's
// address and the `kubernetes` Service's ClusterIP, which pods use), a client certificate per
// component with the identity its built-in RBAC role names, and the service-account signing key.
// openssl 3 makes each in one command; P-256 keys are quick to generate.
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { API_SERVER, KUBERNETES_SERVICE_IP, NODE_IP, NODE_NAME, paths } from "./layout.ts";

const run = promisify(execFile);

/** A config with no default extensions: each certificate gets exactly the ones given below. */
const OPENSSL_CONFIG = "[req]\ndistinguished_name = dn\n[dn]\n";

export interface Identity {
  name: string;
  subject: string;
}

/** Client identities: the subject is what the API server authenticates (CN user, O groups). */
export const CLIENTS: Identity[] = [
  { name: "admin", subject: "/O=system:masters/CN=pglease-cluster-admin" },
  { name: "apiserver-kubelet-client", subject: "/O=system:masters/CN=kube-apiserver-kubelet-client" },
  { name: "kubelet", subject: `/O=system:nodes/CN=system:node:${NODE_NAME}` },
  { name: "controller-manager", subject: "/CN=system:kube-controller-manager" },
  { name: "scheduler", subject: "/CN=system:kube-scheduler" },
  { name: "proxy", subject: "/CN=system:kube-proxy" },
];

export const pki = {
  caCert: join(paths.pki, "ca.crt"),
  caKey: join(paths.pki, "ca.key"),
  serverCert: join(paths.pki, "apiserver.crt"),
  serverKey: join(paths.pki, "apiserver.key"),
  serviceAccountKey: join(paths.pki, "service-account.key"),
  /** The API server verifies tokens with the public half (it does not read a PKCS#8 private key for that). */
  serviceAccountPublicKey: join(paths.pki, "service-account.pub"),
  cert: (name: string) => join(paths.pki, `${name}.crt`),
  key: (name: string) => join(paths.pki, `${name}.key`),
};

export async function generatePki(): Promise<void> {
  const config = join(paths.pki, "openssl.cnf");
  await writeFile(config, OPENSSL_CONFIG);
  const newKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  const req = (args: string[]) => run("openssl", ["req", "-x509", "-config", config, ...newKey, ...args]);
  await req([
    ...["-keyout", pki.caKey, "-out", pki.caCert, "-days", "3650", "-subj", "/CN=pglease-cluster-ca"],
    ...["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
  ]);
  const signed = (key: string, cert: string, subject: string, extensions: string[]) =>
    req([
      ...["-keyout", key, "-out", cert, "-days", "365", "-subj", subject],
      ...["-CA", pki.caCert, "-CAkey", pki.caKey],
      ...["-addext", "basicConstraints=critical,CA:FALSE", "-addext", "keyUsage=critical,digitalSignature"],
      ...extensions.flatMap((e) => ["-addext", e]),
    ]);
  const names = [
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
  ];
  await Promise.all([
    signed(pki.serverKey, pki.serverCert, "/CN=kube-apiserver", [
      "extendedKeyUsage=serverAuth",
      `subjectAltName=${[NODE_IP, KUBERNETES_SERVICE_IP, "127.0.0.1"].map((ip) => `IP:${ip}`).join(",")},${names.map((n) => `DNS:${n}`).join(",")}`,
    ]).then(() => undefined),
    ...CLIENTS.map((client) =>
      signed(pki.key(client.name), pki.cert(client.name), client.subject, ["extendedKeyUsage=clientAuth"]),
    ),
    run("openssl", [
      "genpkey",
      "-algorithm",
      "EC",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-out",
      pki.serviceAccountKey,
    ]),
  ]);
  await run("openssl", [
    "pkey",
    "-in",
    pki.serviceAccountKey,
    "-pubout",
    "-out",
    pki.serviceAccountPublicKey,
  ]);
  await Promise.all(CLIENTS.map((client) => writeKubeconfig(client.name)));
}

export const kubeconfigFor = (name: string) => join(paths.config, `${name}.kubeconfig`);

async function writeKubeconfig(name: string): Promise<void> {
  const text = `apiVersion: v1
kind: Config
clusters:
- name: pglease
  cluster:
    server: ${API_SERVER}
    certificate-authority: ${pki.caCert}
users:
- name: ${name}
  user:
    client-certificate: ${pki.cert(name)}
    client-key: ${pki.key(name)}
contexts:
- name: ${name}
  context:
    cluster: pglease
    user: ${name}
current-context: ${name}
`;
  await writeFile(kubeconfigFor(name), text, { mode: 0o600 });
}
