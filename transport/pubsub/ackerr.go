package pubsub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/googleapis/gax-go/v2/apierror"
)

// With exactly-once delivery, Acknowledge and ModifyAckDeadline answer a
// partly failed request with an error whose ErrorInfo metadata maps each
// failed ack ID to a reason: PERMANENT_FAILURE_INVALID_ACK_ID when its
// lease expired (the message is, or will be, with another member), or a
// reason starting TRANSIENT_ that is worth retrying. Ack IDs it does not
// name succeeded.
const (
	invalidAckID    = "PERMANENT_FAILURE_INVALID_ACK_ID"
	transientPrefix = "TRANSIENT_"
	// settleTries bounds the attempts for ack IDs that fail transiently.
	settleTries = 3
)

// settle runs rpc on ids and reports how many of them Pub/Sub said had
// lost their lease; ack IDs that failed transiently are tried again, and
// any other failure is an error.
func settle(ctx context.Context, ids []string, rpc func(context.Context, []string) error) (lost int, err error) {
	for try := 1; ; try++ {
		err := rpc(ctx, ids)
		if err == nil {
			return lost, nil
		}
		reasons := ackFailures(err)
		if reasons == nil {
			return lost, err
		}
		var retry []string
		var other []error
		named := 0
		for _, id := range ids {
			reason, failed := reasons[id]
			if failed {
				named++
			}
			switch {
			case !failed:
			case reason == invalidAckID:
				lost++
			case strings.HasPrefix(reason, transientPrefix):
				retry = append(retry, id)
			default:
				other = append(other, errors.New(reason))
			}
		}
		if named == 0 {
			// Metadata about something else: the whole call failed.
			return lost, err
		}
		if len(other) > 0 {
			return lost, fmt.Errorf("%w (%w)", err, errors.Join(other...))
		}
		if len(retry) == 0 {
			return lost, nil
		}
		if try == settleTries {
			return lost, fmt.Errorf("%d ack IDs still failing after %d tries: %w", len(retry), try, err)
		}
		select {
		case <-ctx.Done():
			return lost, ctx.Err()
		case <-time.After(time.Duration(try) * 100 * time.Millisecond):
		}
		ids = retry
	}
}

// ackFailures returns the per-ack-ID failure reasons an error carries, or
// nil when it carries none (the whole call failed).
func ackFailures(err error) map[string]string {
	var apiErr *apierror.APIError
	if !errors.As(err, &apiErr) {
		if apiErr, _ = apierror.FromError(err); apiErr == nil {
			return nil
		}
	}
	if md := apiErr.Metadata(); len(md) > 0 {
		return md
	}
	return nil
}
