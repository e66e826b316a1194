package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
)

// watermillGuarantee is what Watermill lacks next to seqbox.
const watermillGuarantee = "dedupe in memory (one process, 1 min window), id marked seen before the handler runs"

// dedupWindow is the Deduplicator's memory, NewMapExpiringKeyRepository's
// usual one minute.
const dedupWindow = time.Minute

// runWatermill publishes the stream to topics PostgreSQL topics (a key
// always to the same topic, in stream order), then times a Router with
// one consumer-group subscription per topic. The handler writes the effect
// row with the subscriber's own transaction (watermill-sql's
// TxFromContext), which also advances the group's offset, so effect and
// "done" commit together. Duplicates are dropped by the Deduplicator
// middleware keyed on the message UUID (the message id).
func runWatermill(ctx context.Context, o Options, admin *sql.DB, schema string, topics int, msgs []msg) (Result, error) {
	res := Result{System: "watermill", Guarantee: watermillGuarantee,
		Settings: fmt.Sprintf("SubscribeBatchSize=%d PollInterval=%s, Deduplicator on message UUID", o.WatermillBatch, o.WatermillPoll)}
	if topics > 1 {
		res.System = fmt.Sprintf("watermill-%dtopics", topics)
		res.Settings += fmt.Sprintf(", %d topics (key mod %d)", topics, topics)
	}
	if err := createSchema(ctx, admin, schema); err != nil {
		return res, err
	}
	db, err := sql.Open("pgx", o.plainDB())
	if err != nil {
		return res, err
	}
	defer db.Close()
	db.SetMaxOpenConns(2*topics + 4)
	beginner := wsql.BeginnerFromStdSQL(db)
	schemaAdapter := wsql.DefaultPostgreSQLSchema{
		GenerateMessagesTableName: func(topic string) string { return quote(schema) + "." + quote("watermill_"+topic) },
		SubscribeBatchSize:        o.WatermillBatch,
	}
	offsets := wsql.DefaultPostgreSQLOffsetsAdapter{
		GenerateMessagesOffsetsTableName: func(topic string) string { return quote(schema) + "." + quote("watermill_offsets_"+topic) },
	}
	names := make([]string, topics)
	for i := range names {
		names[i] = "peers_" + strconv.Itoa(i)
	}

	pub, err := wsql.NewPublisher(beginner, wsql.PublisherConfig{SchemaAdapter: schemaAdapter, AutoInitializeSchema: true}, nil)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	if err := publishWatermill(pub, names, msgs); err != nil {
		return res, err
	}
	res.Published = time.Since(t0)

	sub, err := wsql.NewSubscriber(beginner, wsql.SubscriberConfig{
		ConsumerGroup: "peers", SchemaAdapter: schemaAdapter, OffsetsAdapter: offsets, InitializeSchema: true,
		PollInterval: o.WatermillPoll, ResendInterval: 10 * time.Millisecond, RetryInterval: 10 * time.Millisecond,
	}, nil)
	if err != nil {
		return res, err
	}
	defer sub.Close()
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 30 * time.Second}, watermill.NopLogger{})
	if err != nil {
		return res, err
	}
	repo, err := middleware.NewMapExpiringKeyRepository(dedupWindow)
	if err != nil {
		return res, err
	}
	var seen, dropped atomic.Int64
	dedup := &middleware.Deduplicator{
		KeyFactory: func(m *message.Message) (string, error) { return m.UUID, nil },
		Repository: countingRepo{ExpiringKeyRepository: repo, dups: &dropped},
	}
	// Outermost: counts every delivery the router finished.
	router.AddMiddleware(func(h message.HandlerFunc) message.HandlerFunc {
		return func(m *message.Message) ([]*message.Message, error) {
			out, err := h(m)
			if err == nil {
				seen.Add(1)
			}
			return out, err
		}
	}, dedup.Middleware)
	var applied atomic.Int64
	insert := insertEffect(schema)
	for _, name := range names {
		router.AddConsumerHandler(name, name, sub, func(m *message.Message) error {
			tx, ok := wsql.TxFromContext(m.Context())
			if !ok {
				return errors.New("watermill: no subscriber transaction in the message context")
			}
			v, err := strconv.ParseInt(m.Metadata.Get("version"), 10, 64)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(m.Context(), insert, m.UUID, m.Metadata.Get("key"), v); err != nil {
				return err
			}
			applied.Add(1)
			return nil
		})
	}

	t0 = time.Now()
	runDone := make(chan error, 1)
	go func() { runDone <- router.Run(ctx) }()
	waitErr := waitFor(ctx, &seen, o.Stall, func() (bool, error) {
		select {
		case err := <-runDone:
			runDone <- err
			return false, fmt.Errorf("router stopped: %v", err)
		default:
		}
		if seen.Load() < int64(len(msgs)) {
			return false, nil
		}
		// Every message was handled: done once each group's offset, which
		// commits with the effects, reached its topic's last message.
		return offsetsCaughtUp(ctx, admin, schemaAdapter, offsets, names)
	})
	res.Consumed = time.Since(t0)
	closeErr := router.Close()
	if waitErr != nil {
		return res, fmt.Errorf("watermill: %w (handled %d of %d)", waitErr, seen.Load(), len(msgs))
	}
	if closeErr != nil {
		return res, fmt.Errorf("watermill router close: %w", closeErr)
	}
	res.Notes = fmt.Sprintf("handled=%d dropped_by_deduplicator=%d handler_applied=%d", seen.Load(), dropped.Load(), applied.Load())
	res.Effects, err = countEffects(ctx, admin, schema)
	return res, err
}

// publishWatermill publishes msgs, each to the topic of its key, 1,000
// messages per Publish (one INSERT).
func publishWatermill(pub message.Publisher, names []string, msgs []msg) error {
	per := make([][]*message.Message, len(names))
	flush := func(t int) error {
		if len(per[t]) == 0 {
			return nil
		}
		err := pub.Publish(names[t], per[t]...)
		per[t] = per[t][:0]
		return err
	}
	for _, m := range msgs {
		k, _ := strconv.Atoi(m.Key[1:])
		t := k % len(names)
		wm := message.NewMessage(m.ID, m.body())
		wm.Metadata.Set("key", m.Key)
		wm.Metadata.Set("version", strconv.FormatInt(m.Version, 10))
		per[t] = append(per[t], wm)
		if len(per[t]) == 1000 {
			if err := flush(t); err != nil {
				return err
			}
		}
	}
	for t := range names {
		if err := flush(t); err != nil {
			return err
		}
	}
	return nil
}

// offsetsCaughtUp reports whether the consumer group's committed offset
// is each topic's last message.
func offsetsCaughtUp(ctx context.Context, admin *sql.DB, s wsql.DefaultPostgreSQLSchema, o wsql.DefaultPostgreSQLOffsetsAdapter, names []string) (bool, error) {
	for _, name := range names {
		var ok bool
		err := admin.QueryRowContext(ctx, `SELECT COALESCE((SELECT offset_acked FROM `+o.MessagesOffsetsTable(name)+
			` WHERE consumer_group = 'peers'), -1) = (SELECT MAX("offset") FROM `+s.MessagesTable(name)+`)`).Scan(&ok)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// countingRepo counts the ids the Deduplicator's repository called
// duplicates: the deliveries it dropped before the handler.
type countingRepo struct {
	middleware.ExpiringKeyRepository
	dups *atomic.Int64
}

// IsDuplicate asks the wrapped repository and counts a yes.
func (r countingRepo) IsDuplicate(ctx context.Context, key string) (bool, error) {
	dup, err := r.ExpiringKeyRepository.IsDuplicate(ctx, key)
	if dup {
		r.dups.Add(1)
	}
	return dup, err
}
