// Package nats starts NATS servers with JetStream in process, on loopback,
// for seqbox's tests and for `seqbox-lab chaos --transport nats`: one server
// (Start) or a cluster of servers joined by routes (StartCluster). The
// client address is a plain nats:// URL, so consumer processes other than
// the one running the servers can connect to it.
package nats

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds how long a starting server may take to accept
// connections.
const readyTimeout = 10 * time.Second

// Options configures Start.
type Options struct {
	// Dir is where JetStream keeps its files. Default: a new temporary
	// directory, removed by Close.
	Dir string
	// Port is the client port on 127.0.0.1. Default: a free port.
	Port int
	// Name is the server's name. Default "seqbox-nats".
	Name string
}

// Server is one running NATS server with JetStream.
type Server struct {
	srv     *server.Server
	opts    *server.Options
	ownsDir bool
}

// Start runs a NATS server with JetStream on 127.0.0.1 and waits until it
// accepts connections.
func Start(opts Options) (*Server, error) {
	if opts.Name == "" {
		opts.Name = "seqbox-nats"
	}
	port := opts.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	dir, owns, err := storeDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	s := &Server{ownsDir: owns, opts: &server.Options{
		ServerName: opts.Name,
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
	}}
	if err := s.run(); err != nil {
		s.removeDir()
		return nil, err
	}
	return s, nil
}

// storeDir returns dir, or a new temporary directory the caller owns.
func storeDir(dir string) (string, bool, error) {
	if dir != "" {
		return dir, false, nil
	}
	tmp, err := os.MkdirTemp("", "seqbox-nats-*")
	if err != nil {
		return "", false, fmt.Errorf("nats broker: store directory: %w", err)
	}
	return tmp, true, nil
}

// run starts the server with s.opts and waits for it to be ready.
func (s *Server) run() error {
	opts := *s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		return fmt.Errorf("nats broker: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("nats broker: server %s not ready within %s", opts.ServerName, readyTimeout)
	}
	if a, ok := srv.Addr().(*net.TCPAddr); ok {
		s.opts.Port = a.Port // a restart comes back on the same address
	}
	s.srv = srv
	return nil
}

// URL is the client address, nats://127.0.0.1:PORT.
func (s *Server) URL() string { return s.srv.ClientURL() }

// Name is the server's name, as JetStream reports it for stream and
// consumer leaders.
func (s *Server) Name() string { return s.opts.ServerName }

// Running reports whether the server is up.
func (s *Server) Running() bool { return s.srv != nil && s.srv.Running() }

// Shutdown stops the server and waits until it has stopped; its files
// stay, so Restart can bring it back with its data.
func (s *Server) Shutdown() {
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}

// Restart starts a stopped server again, on the same ports and files.
func (s *Server) Restart() error {
	if s.Running() {
		return errors.New("nats broker: restart of a running server")
	}
	return s.run()
}

// Close stops the server and removes the store directory Start created.
func (s *Server) Close() error {
	s.Shutdown()
	return s.removeDir()
}

func (s *Server) removeDir() error {
	if !s.ownsDir {
		return nil
	}
	s.ownsDir = false
	return os.RemoveAll(s.opts.StoreDir)
}
