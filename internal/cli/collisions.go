package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seqbox/seqbox/internal/ops"
	"github.com/seqbox/seqbox/internal/serve"
	"github.com/spf13/cobra"
)

func collisionsCmd() *cobra.Command {
	var f opFlags
	var limit int
	c := &cobra.Command{
		Use:   "collisions",
		Short: "List the identities that came again with another payload, parked for investigation",
		Long: `List the consumer's collisions: an event whose source and id were already
recorded came again with a different payload. The second payload is parked,
not applied and not dropped as a duplicate, until an operator looks into it.
Each row names the identity, its key (none for an unkeyed event), when it
was parked, the outcome the first payload reached and the fields that
differ. --output json prints both payloads side by side and the fields'
values, as GET /v1/admin/collisions answers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > serve.MaxCollisions {
				return fmt.Errorf("collisions: --limit %d: want 1 to %d", limit, serve.MaxCollisions)
			}
			if f.server != "" {
				return f.remote(cmd, func(c *adminClient) error { return c.listCollisions(limit, f.out) })
			}
			return f.inspect(cmd.Context(), func(s *session) error {
				cs, more, err := serve.Collisions(cmd.Context(), s.store.Executor(), s.reg.Consumer, limit)
				if err != nil {
					return err
				}
				return writeCollisionsNoting(cmd, cs, more, f.out)
			})
		},
	}
	f.register(c, true)
	c.Flags().IntVar(&limit, "limit", serve.MaxCollisions, fmt.Sprintf("list the oldest N collisions (1 to %d); stderr says when more are parked", serve.MaxCollisions))
	return c
}

// writeCollisionsNoting prints collisions, and says on stderr when more
// are parked than were listed.
func writeCollisionsNoting(cmd *cobra.Command, cs []serve.Collision, more bool, out ops.Format) error {
	if more {
		fmt.Fprintf(cmd.ErrOrStderr(), "seqbox: collisions: the %d oldest shown; more are parked (raise --limit)\n", len(cs))
	}
	return writeCollisions(cmd.OutOrStdout(), cs, out)
}

// writeCollisions prints collisions: a table, or the admin API's views.
func writeCollisions(w io.Writer, cs []serve.Collision, out ops.Format) error {
	if out.Structured() {
		return ops.WriteRows(w, out, cs)
	}
	rows := make([]ops.CollisionRow, len(cs))
	for i, c := range cs {
		r := ops.CollisionRow{Source: c.Source, ID: c.ID, PartitionKey: c.PartitionKey, FirstOutcome: c.FirstOutcome}
		if c.At != nil {
			r.At, _ = time.Parse(time.RFC3339Nano, *c.At)
		}
		var fields []string
		for _, d := range c.Diff {
			fields = append(fields, strings.Join(d.Path, "."))
		}
		r.Fields = strings.Join(fields, ", ")
		rows[i] = r
	}
	return ops.WriteCollisionRows(w, rows)
}

// listCollisions is collisions --server.
func (c *adminClient) listCollisions(limit int, out ops.Format) error {
	var res struct {
		Consumer   string            `json:"consumer"`
		Collisions []serve.Collision `json:"collisions"`
		More       bool              `json:"more"`
	}
	if err := c.call(http.MethodGet, "/v1/admin/collisions?limit="+strconv.Itoa(limit), "", nil, &res, readTimeout, "collisions"); err != nil {
		return err
	}
	if res.Consumer == "" {
		return c.unreadable(errors.New("its list of collisions names no consumer"))
	}
	return writeCollisionsNoting(c.cmd, res.Collisions, res.More, out)
}
