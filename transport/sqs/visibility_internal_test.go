package sqs

import (
	"testing"
	"time"
)

// TestVisibility: delays round up to whole seconds and are clamped to
// SQS's twelve hours.
func TestVisibility(t *testing.T) {
	for d, want := range map[time.Duration]int32{
		-time.Second: 0, 0: 0, time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2,
		12 * time.Hour: 43200, 13 * time.Hour: 43200,
	} {
		if got := visibility(d); got != want {
			t.Errorf("visibility(%s) = %d, want %d", d, got, want)
		}
	}
}

// TestMaxReceiveCount reads SQS's numeric and goaws's string form.
func TestMaxReceiveCount(t *testing.T) {
	for policy, want := range map[string]int{
		"": 0, `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:dlq","maxReceiveCount":21}`: 21,
		`{"maxReceiveCount": "7", "deadLetterTargetArn":"dlq"}`: 7,
	} {
		if got, err := maxReceiveCount(policy); err != nil || got != want {
			t.Errorf("maxReceiveCount(%q) = %d, %v; want %d", policy, got, err, want)
		}
	}
	if _, err := maxReceiveCount(`{"maxReceiveCount":"many"}`); err == nil {
		t.Error("a non-numeric maxReceiveCount was accepted")
	}
}
