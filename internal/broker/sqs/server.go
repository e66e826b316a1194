// Package sqs runs goaws (github.com/Admiral-Piett/goaws), an
// SQS-compatible server, inside the process on loopback, for the SQS
// transport's tests and for `seqbox-lab chaos --transport sqs`, whose child
// processes reach it over TCP.
//
// goaws keeps its queues in package-level variables: every Server started
// in one process serves the same queues, so queue names must be unique
// (NewQueueName). goaws speaks only the AWS Query protocol (form-encoded
// requests, XML answers); Client builds an aws-sdk-go-v2 SQS client that
// does too. What goaws does and does not implement compared with real SQS
// is listed in the doc of package transport/sqs and checked by this
// package's probe tests.
package sqs

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/Admiral-Piett/goaws/app"
	"github.com/Admiral-Piett/goaws/app/gosqs"
	"github.com/Admiral-Piett/goaws/app/router"
	"github.com/sirupsen/logrus"
)

// Options configures Start. Zero values take the defaults.
type Options struct {
	// Addr is the loopback address to listen on. Default "127.0.0.1:0" (a
	// free port).
	Addr string
	// Tick is how often goaws makes messages whose visibility timeout ran
	// out visible again and forgets expired deduplication ids. Redelivery
	// and nack delays are late by up to one Tick. Default 1s, as goaws's
	// own server: each tick holds goaws's global lock for a time that
	// grows with messages × deduplication ids in each queue (a nested
	// loop), so with a shorter tick a queue a few thousand deep starves
	// every request. Keep queues under about 2,000 messages deep.
	Tick time.Duration
	// Log receives goaws's own log (logrus, process-wide). Default: discarded.
	Log io.Writer
	// KeepGroups passes MessageGroupId to goaws as sent. By default the
	// server gives every message a group of its own, because goaws's
	// group handling is broken (see the probes): it remembers one locked
	// group per queue, and a message it skips for a locked group stays
	// invisible, undelivered, for a whole visibility timeout, so a group
	// yields one message per timeout and several messages of one key
	// cannot be in flight together as they can in real SQS FIFO. Without
	// it goaws is a FIFO queue with deduplication but no group order,
	// which the transport's tests declare (NoPerKeyOrder).
	KeepGroups bool
}

// Server is a goaws instance listening on loopback.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
	once sync.Once
}

// shared is the goaws state of the process: its periodic task runs once,
// for as long as any Server is open.
var shared struct {
	mu   sync.Mutex
	open int
	quit chan struct{}
	done chan struct{}
}

// gate serializes goaws's queue map: its handlers read the map without a
// lock, so a CreateQueue or DeleteQueue racing with any other request could
// crash the process ("concurrent map read and map write"). Requests that
// add or remove queues take it exclusively, all others shared.
var gate sync.RWMutex

// Start starts goaws on opts.Addr. The server accepts the SQS actions goaws
// implements at Endpoint, from this process or another one.
func Start(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Tick <= 0 {
		opts.Tick = time.Second
	}
	host, _, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("goaws: Options.Addr %q: %w", opts.Addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("goaws: Options.Addr %q is not a loopback address", opts.Addr)
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("goaws: listen on %s: %w", opts.Addr, err)
	}
	configure(ln.Addr().(*net.TCPAddr), opts)
	s := &Server{ln: ln, done: make(chan struct{})}
	s.srv = &http.Server{Handler: guarded(router.New(), !opts.KeepGroups), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// configure sets goaws's process-wide environment and starts its periodic
// task if no other Server runs it.
func configure(addr *net.TCPAddr, opts Options) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if opts.Log != nil {
		logrus.SetOutput(opts.Log)
		logrus.SetLevel(logrus.InfoLevel)
	} else {
		// goaws logs every message at Info; formatting them only to
		// discard them costs more than the request.
		logrus.SetOutput(io.Discard)
		logrus.SetLevel(logrus.ErrorLevel)
	}
	gate.Lock() // CreateQueue reads the environment
	app.CurrentEnvironment.Host = addr.IP.String()
	app.CurrentEnvironment.Port = fmt.Sprint(addr.Port)
	app.CurrentEnvironment.AccountID = AccountID
	app.CurrentEnvironment.Region = ""
	// Without it goaws ignores MessageDeduplicationId altogether.
	app.CurrentEnvironment.EnableDuplicates = true
	// SQS's defaults for a queue created without these attributes (goaws
	// would make the visibility timeout 0).
	app.CurrentEnvironment.QueueAttributeDefaults = app.EnvQueueAttributes{VisibilityTimeout: 30, MaximumMessageSize: 256 << 10}
	gate.Unlock()
	shared.open++
	if shared.open == 1 {
		shared.quit, shared.done = make(chan struct{}), make(chan struct{})
		quit, done := shared.quit, shared.done
		go func() {
			defer close(done)
			gosqs.PeriodicTasks(opts.Tick, quit)
		}()
	}
}

// guarded runs h with the queue map gate taken: exclusively for the actions
// that add or remove queues, shared for the others. With ownGroups it gives
// every message sent a MessageGroupId of its own (see Options.KeepGroups).
func guarded(h http.Handler, ownGroups bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		action := r.FormValue("Action") // parses the form goaws reads
		if ownGroups {
			ownGroup(action, r)
		}
		switch action {
		case "CreateQueue", "DeleteQueue":
			gate.Lock()
			defer gate.Unlock()
		default:
			gate.RLock()
			defer gate.RUnlock()
		}
		h.ServeHTTP(w, r)
	})
}

// ownGroup gives every message sent a MessageGroupId of its own. Before a
// receive it also forgets goaws's group lock, which then only ever names a
// group of one message: left alone, it would hide that message for a
// whole visibility timeout after a ChangeMessageVisibility to 0.
func ownGroup(action string, r *http.Request) {
	switch action {
	case "SendMessage", "SendMessageBatch":
		for k, vs := range r.Form {
			if k == "MessageGroupId" || strings.HasSuffix(k, ".MessageGroupId") {
				for i := range vs {
					vs[i] += "#" + rand.Text()
				}
			}
		}
	case "ReceiveMessage":
		u := r.FormValue("QueueUrl")
		if u == "" {
			u = r.URL.Path
		}
		app.SyncQueues.Lock()
		if q, ok := app.SyncQueues.Queues[path.Base(u)]; ok {
			q.FIFOMessages = nil
		}
		app.SyncQueues.Unlock()
	}
}

// Endpoint is the server's base URL, for a client's BaseEndpoint.
func (s *Server) Endpoint() string { return "http://" + s.ln.Addr().String() }

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, dropping its connections. goaws's queues live on
// for other Servers of the process; its periodic task stops with the last.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		err = s.srv.Close()
		<-s.done
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		shared.mu.Lock()
		shared.open--
		var done chan struct{}
		if shared.open == 0 {
			close(shared.quit)
			done = shared.done
		}
		shared.mu.Unlock()
		if done != nil {
			<-done
		}
	})
	return err
}
