package pgdb

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/seqbox/seqbox/store"
)

// Pipeline runs stmts on conn, in its open transaction, as one pgx batch:
// sent together and answered together, one round trip for all of them
// (statements pgx has not prepared on conn yet cost one more). A statement
// with a Read has its rows read by it, in order. It returns the rows each
// statement affected (or returned); on a failure, those of the statements
// before it and a *store.PipelineError.
func Pipeline(ctx context.Context, conn *sql.Conn, stmts []store.Statement) (affected []int64, err error) {
	err = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("postgres: pipeline: the connection is %T, not pgx's", dc)
		}
		var b pgx.Batch
		for _, s := range stmts {
			b.Queue(s.Query, s.Args...)
		}
		br := sc.Conn().SendBatch(ctx, &b)
		for i, s := range stmts {
			n, err := answer(br, s)
			if err != nil {
				br.Close()
				return &store.PipelineError{Index: i, Query: s.Query, Err: err}
			}
			affected = append(affected, n)
		}
		return br.Close()
	})
	return affected, err
}

// answer takes s's answer from br: its rows, through s.Read, or its count.
func answer(br pgx.BatchResults, s store.Statement) (int64, error) {
	if s.Read == nil {
		tag, err := br.Exec()
		return tag.RowsAffected(), err
	}
	rows, err := br.Query()
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	if err := s.Read(rows); err != nil {
		return 0, err
	}
	rows.Close()
	return rows.CommandTag().RowsAffected(), rows.Err()
}
