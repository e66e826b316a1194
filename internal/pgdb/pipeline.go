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
// (statements pgx has not prepared on conn yet cost one more). It returns
// the rows each statement affected; on a failure, those of the statements
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
			tag, err := br.Exec()
			if err != nil {
				br.Close()
				return &store.PipelineError{Index: i, Query: s.Query, Err: err}
			}
			affected = append(affected, tag.RowsAffected())
		}
		return br.Close()
	})
	return affected, err
}
