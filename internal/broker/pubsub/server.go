// Package pubsub starts an in-process Google Pub/Sub server for tests and
// for `seqbox-lab chaos --transport pubsub`: the pstest fake of
// cloud.google.com/go/pubsub/v2, listening on loopback so that consumer
// processes started by the chaos parent reach it over gRPC (without TLS or
// credentials, as they would reach the Pub/Sub emulator).
//
// pstest is a simplified service; transport/pubsub's package doc lists
// what it does not emulate, and probe_test.go here pins down each
// behaviour the transport relies on.
package pubsub

import (
	"fmt"
	"net"

	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"

	pstransport "github.com/seqbox/seqbox/transport/pubsub"
)

// Project is the project every topic and subscription of the fake lives
// in; pstest accepts any name.
const Project = "seqbox"

// Server is a running fake Pub/Sub service.
type Server struct {
	// Addr is the loopback host:port the service listens on: the value of
	// PUBSUB_EMULATOR_HOST, or of transport/pubsub's Config.Endpoint, for
	// another process.
	Addr string
	srv  *pstest.Server
}

// Start starts a fake Pub/Sub service on 127.0.0.1 at port (0: any free
// port). Reactors, when given, answer the RPCs they name in place of the
// fake (tests use them to inject the answers of features pstest lacks).
func Start(port int, reactors ...pstest.ServerReactorOption) (s *Server, err error) {
	// pstest panics when it cannot listen; turn that into an error.
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("pubsub broker: start: %v", r)
		}
	}()
	srv := pstest.NewServerWithAddress(net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), reactors...)
	return &Server{Addr: srv.Addr, srv: srv}, nil
}

// ClientOptions dial the server without TLS or credentials.
func (s *Server) ClientOptions() []option.ClientOption {
	return pstransport.EmulatorOptions(s.Addr)
}

// Fake is the pstest server itself, for tests that inspect what it holds
// (published messages, their delivery and ack counts).
func (s *Server) Fake() *pstest.Server { return s.srv }

// Close stops the server; connected clients see their calls fail.
func (s *Server) Close() error { return s.srv.Close() }
