// Command kube-apiserver-go runs the real kube-apiserver over an embedded etcd in one process on
// 127.0.0.1, for pglease's tests and bench. Nothing of it ships.
//
//	kube-apiserver-go --dir DIR [-- extra kube-apiserver flags]
//
// It writes DIR/kubeconfig (the admin, a system:masters client certificate) and DIR/server.json
// before the API server listens; the caller waits for /readyz. SIGTERM or SIGINT shuts the API
// server down gracefully, then etcd, and exits 0.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"

	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

// serverInfo is DIR/server.json, the contract with test/support/real-kube-apiserver.ts.
type serverInfo struct {
	Server            string `json:"server"`
	Kubeconfig        string `json:"kubeconfig"`
	CAFile            string `json:"caFile"`
	ServingCertFile   string `json:"servingCertFile"`
	ServingKeyFile    string `json:"servingKeyFile"`
	AdminCertFile     string `json:"adminCertFile"`
	AdminKeyFile      string `json:"adminKeyFile"`
	Etcd              string `json:"etcd"`
	KubernetesVersion string `json:"kubernetesVersion"`
	EtcdVersion       string `json:"etcdVersion"`
	Pid               int    `json:"pid"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kube-apiserver-go:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	flags := flag.NewFlagSet("kube-apiserver-go", flag.ContinueOnError)
	dir := flags.String("dir", "", "directory for the keys, etcd's data, kubeconfig and server.json (created; the caller removes it)")
	printVersions := flags.Bool("versions", false, "print the Kubernetes and etcd module versions built in, then exit")
	if err := flags.Parse(args); err != nil {
		return err
	}
	kubernetesVersion, etcdVersion := moduleVersions()
	if *printVersions {
		fmt.Printf("kubernetes %s\netcd %s\n", kubernetesVersion, etcdVersion)
		return nil
	}
	if *dir == "" {
		return fmt.Errorf("--dir is required: a directory for the keys, etcd's data and kubeconfig")
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	// Built first: it installs the SIGTERM/SIGINT handler, so a signal during etcd's start still
	// ends in an orderly shutdown rather than the default kill.
	command := app.NewAPIServerCommand()

	keys, err := generatePKI(*dir)
	if err != nil {
		return fmt.Errorf("generate certificates: %w", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcd, etcdURL, err := startEtcd(*dir, ports[0], ports[1])
	if err != nil {
		return err
	}
	defer etcd.Close()

	info := serverInfo{
		Server:            "https://127.0.0.1:" + strconv.Itoa(ports[2]),
		Kubeconfig:        filepath.Join(*dir, "kubeconfig"),
		CAFile:            keys.caFile,
		ServingCertFile:   keys.servingCertFile,
		ServingKeyFile:    keys.servingKeyFile,
		AdminCertFile:     keys.adminCertFile,
		AdminKeyFile:      keys.adminKeyFile,
		Etcd:              etcdURL,
		KubernetesVersion: kubernetesVersion,
		EtcdVersion:       etcdVersion,
		Pid:               os.Getpid(),
	}
	if err := writeClientFiles(*dir, info); err != nil {
		return err
	}
	command.SetArgs(append(apiServerFlags(*dir, keys, etcdURL, ports[2]), flags.Args()...))
	return command.Execute()
}

func apiServerFlags(dir string, keys pki, etcdURL string, port int) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + dir,
		"--tls-cert-file=" + keys.servingCertFile,
		"--tls-private-key-file=" + keys.servingKeyFile,
		"--client-ca-file=" + keys.caFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + keys.serviceAccountKeyFile,
		"--service-account-signing-key-file=" + keys.serviceAccountKeyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		// The reconciler would publish 127.0.0.1 as the kubernetes Service's endpoint, which
		// validation refuses (loopback), logging an error every few seconds; nothing here needs it.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
}

func writeClientFiles(dir string, info serverInfo) error {
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: admin
  context:
    cluster: test
    user: admin
current-context: admin
`, info.Server, info.CAFile, info.AdminCertFile, info.AdminKeyFile)
	if err := os.WriteFile(info.Kubeconfig, []byte(kubeconfig), 0o600); err != nil {
		return err
	}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	// Renamed into place so that a reader polling for server.json never sees half of it.
	partial := filepath.Join(dir, "server.json.partial")
	if err := os.WriteFile(partial, data, 0o600); err != nil {
		return err
	}
	return os.Rename(partial, filepath.Join(dir, "server.json"))
}

// freePorts asks the kernel for n ports at once (all held open until all are chosen, so no two
// coincide). Another process may take one before etcd or the API server binds it; that fails
// the start loudly rather than silently.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		listener, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer listener.Close()
		ports = append(ports, listener.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func moduleVersions() (kubernetes, etcd string) {
	build, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown", "unknown"
	}
	for _, dep := range build.Deps {
		switch dep.Path {
		case "k8s.io/kubernetes":
			kubernetes = dep.Version
		case "go.etcd.io/etcd/server/v3":
			etcd = dep.Version
		}
	}
	return kubernetes, etcd
}
