package nats

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is a JetStream cluster of servers on loopback, every one routed
// to every other.
type Cluster struct {
	// Nodes are the cluster's servers, in start order.
	Nodes []*Server
	dir   string
}

// StartCluster runs n servers (n ≥ 3 for a JetStream quorum that survives
// one node) in a cluster named "seqbox", each with its own store under
// dir (default: a temporary directory, removed by Close), and waits until
// every one accepts connections.
func StartCluster(n int, dir string) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("nats broker: cluster of %d nodes", n)
	}
	root, owns, err := storeDir(dir)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", p)
	}
	c := &Cluster{dir: root}
	if !owns {
		c.dir = ""
	}
	started := make(chan error, n)
	for i := range n {
		name := fmt.Sprintf("seqbox-nats-%d", i+1)
		nodeDir := filepath.Join(root, name)
		c.Nodes = append(c.Nodes, &Server{opts: &server.Options{
			ServerName: name,
			Host:       "127.0.0.1",
			Port:       server.RANDOM_PORT,
			JetStream:  true,
			StoreDir:   nodeDir,
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: "seqbox", Host: "127.0.0.1", Port: ports[i]},
			Routes:     server.RoutesFromStr(strings.Join(append(append([]string(nil), routes[:i]...), routes[i+1:]...), ",")),
		}})
	}
	// Start them together: a JetStream cluster elects its meta leader
	// only once a quorum of the routed peers is up.
	for _, s := range c.Nodes {
		go func() { started <- s.run() }()
	}
	var errs []error
	for range n {
		errs = append(errs, <-started)
	}
	err = errors.Join(errs...)
	if err == nil {
		err = c.WaitReady(readyTimeout)
	}
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// WaitReady waits until a running node leads the JetStream meta group and
// sees every running node as an online JetStream peer: until then the
// cluster cannot place a stream's replicas.
func (c *Cluster) WaitReady(within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		running := 0
		for _, s := range c.Nodes {
			if s.Running() {
				running++
			}
		}
		for _, s := range c.Nodes {
			if s.Running() && s.srv.JetStreamIsLeader() && len(s.srv.JetStreamClusterPeers()) == running {
				return nil
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("nats broker: JetStream cluster not ready (meta leader and every peer) within %s", within)
}

// freePorts finds n free TCP ports on loopback for the route listeners,
// which must be known before the servers start.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("nats broker: free port: %w", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// URL lists every node's client address, comma-separated, as nats.Connect
// accepts it: a client fails over to the next node when its own stops.
func (c *Cluster) URL() string {
	urls := make([]string, 0, len(c.Nodes))
	for _, s := range c.Nodes {
		if s.srv != nil {
			urls = append(urls, s.URL())
		}
	}
	return strings.Join(urls, ",")
}

// Node returns the node with the given server name, or nil.
func (c *Cluster) Node(name string) *Server {
	for _, s := range c.Nodes {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

// Close stops every node and removes the directory StartCluster created.
func (c *Cluster) Close() error {
	for _, s := range c.Nodes {
		s.Shutdown()
	}
	if c.dir == "" {
		return nil
	}
	return os.RemoveAll(c.dir)
}
