package nats_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/seqbox/seqbox/internal/shorttest"
)

func TestMain(m *testing.M) {
	if shorttest.SkipMain("the NATS transport's broker suite") {
		return
	}
	goleak.VerifyTestMain(m)
}
