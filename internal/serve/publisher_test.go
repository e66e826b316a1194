package serve

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/seqboxtype"
)

// The requests that arrive while a group's transaction waits to begin
// (for SQLite's one writer) go with that group, not with the next one.
func TestRequestsThatArriveWhileAGroupWaitsGoWithIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begun := make(chan struct{})
		var groups [][]string
		p := newPublisher(func(ctx context.Context, g *pubGroup) error {
			<-begun // the transaction waits for the writer
			g.gather()
			var ids []string
			for _, r := range g.reqs {
				ids = append(ids, r.evs[0].ID)
			}
			groups = append(groups, ids)
			return nil
		})
		go p.run()
		publish := func(id string) {
			go func() {
				_, err := p.Publish(context.Background(), []seqboxtype.Event{{ID: id}})
				if err != nil {
					t.Error(err)
				}
			}()
			synctest.Wait()
		}
		publish("a") // its group's transaction waits to begin
		publish("b")
		publish("c")
		close(begun)
		synctest.Wait()
		p.close()
		require.Equal(t, [][]string{{"a", "b", "c"}}, groups)
	})
}
