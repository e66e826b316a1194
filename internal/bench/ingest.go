package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// IngestOptions configure Ingest.
type IngestOptions struct {
	// URL is the gateway's base URL (http://127.0.0.1:8080).
	URL string
	// Clients is how many clients post at once.
	Clients int
	// Batch is the events per request: 1 posts structured-mode events,
	// more posts application/cloudevents-batch+json.
	Batch int
	// Duration is how long the clients post.
	Duration time.Duration
	// Token is the ingest token, when the gateway requires one.
	Token string
}

// IngestResult is what an ingest run measured.
type IngestResult struct {
	Requests, Events int
	Elapsed          time.Duration
	P50, P99         time.Duration
}

// Line renders the result.
func (r IngestResult) Line(o IngestOptions) string {
	return fmt.Sprintf("ingest: batch=%d clients=%d requests=%d events_per_s=%.0f p50_ms=%.2f p99_ms=%.2f",
		o.Batch, o.Clients, r.Requests, float64(r.Events)/r.Elapsed.Seconds(),
		float64(r.P50.Microseconds())/1000, float64(r.P99.Microseconds())/1000)
}

// Ingest is a load generator for `seqbox serve`: Clients clients POST new
// events to /v1/events for Duration, each on keys of its own with
// increasing versions, and every answer must be 202. It measures the
// accepted events per second and the request latency (a 202 is answered
// only after the events are committed in the queue).
func Ingest(ctx context.Context, o IngestOptions) (IngestResult, error) {
	if o.URL == "" || o.Clients < 1 || o.Batch < 1 || o.Duration <= 0 {
		return IngestResult{}, fmt.Errorf("bench ingest: need --url, --clients >= 1, --batch >= 1 and a positive --duration")
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.Clients}, Timeout: 30 * time.Second}
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	var mu sync.Mutex
	var lats []time.Duration
	var firstErr error
	events := 0
	start := time.Now()
	end := start.Add(o.Duration)
	var wg sync.WaitGroup
	for c := range o.Clients {
		wg.Go(func() {
			for i := 1; time.Now().Before(end) && ctx.Err() == nil; i++ {
				parts := make([]string, o.Batch)
				for j := range parts {
					parts[j] = fmt.Sprintf(`{"specversion":"1.0","id":"%s-%d-%d-%d","source":"bench","type":"bench.event","partitionkey":"k%d-%d","objectversion":%d}`,
						run, c, i, j, c, j, i)
				}
				body, ct := parts[0], "application/cloudevents+json"
				if o.Batch > 1 {
					body, ct = "["+strings.Join(parts, ",")+"]", "application/cloudevents-batch+json"
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(o.URL, "/")+"/v1/events", strings.NewReader(body))
				if err == nil {
					req.Header.Set("Content-Type", ct)
					if o.Token != "" {
						req.Header.Set("Authorization", "Bearer "+o.Token)
					}
				}
				t0 := time.Now()
				var resp *http.Response
				if err == nil {
					resp, err = client.Do(req)
				}
				if err == nil {
					msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
					resp.Body.Close()
					if resp.StatusCode != http.StatusAccepted {
						err = fmt.Errorf("%s: %s", resp.Status, msg)
					}
				}
				lat := time.Since(t0)
				mu.Lock()
				if err != nil {
					firstErr = cmpOr(firstErr, err)
					mu.Unlock()
					return
				}
				lats = append(lats, lat)
				events += o.Batch
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res := IngestResult{Requests: len(lats), Events: events, Elapsed: time.Since(start)}
	if firstErr != nil {
		return res, fmt.Errorf("bench ingest: %w", firstErr)
	}
	if len(lats) == 0 {
		return res, fmt.Errorf("bench ingest: no request completed")
	}
	slices.Sort(lats)
	res.P50, res.P99 = lats[len(lats)/2], lats[len(lats)*99/100]
	return res, nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
