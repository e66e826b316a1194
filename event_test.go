package seqbox_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seqbox/seqbox"
	"github.com/stretchr/testify/require"
)

func TestParseEventValid(t *testing.T) {
	raw := []byte(`{"specversion":"1.0","id":"evt-482","source":"crm","type":"order.cancelled",
		"time":"2026-10-09T12:00:00Z","partitionkey":"PED-4821","objectversion":7,
		"businesskey":"cancel:PED-4821","causationid":"evt-481","tenantid":"acme",
		"dataschema":"order/v2","publishedat":"2026-10-09T12:00:01Z","data":{"qty":10,"note":"<b>"}}`)
	ev, err := seqbox.ParseEvent(raw)
	require.NoError(t, err)
	require.Equal(t, "evt-482", ev.ID)
	require.Equal(t, "crm", ev.Source)
	require.Equal(t, "order.cancelled", ev.Type)
	require.Equal(t, "1.0", ev.SpecVersion)
	require.True(t, ev.Time.Equal(time.Date(2026, 10, 9, 12, 0, 0, 0, time.UTC)), "time = %s", ev.Time)
	require.Equal(t, "PED-4821", ev.PartitionKey)
	v, ok := ev.Version()
	require.True(t, ok)
	require.Equal(t, int64(7), v)
	require.Equal(t, "cancel:PED-4821", ev.BusinessKey)
	require.Equal(t, "evt-481", ev.CausationID)
	require.Equal(t, "acme", ev.TenantID)
	require.Equal(t, "order/v2", ev.DataSchema)
	require.JSONEq(t, `{"qty":10,"note":"<b>"}`, string(ev.Data))
	require.Equal(t, raw, ev.Raw, "Raw must be the envelope exactly as received")
	require.Len(t, ev.Hash, 64, "hex SHA-256")

	// Raw is a copy: the caller may reuse its buffer.
	raw[0] = ' '
	require.Equal(t, byte('{'), ev.Raw[0])
}

func TestParseEventOptionalAttributes(t *testing.T) {
	ev, err := seqbox.ParseEvent([]byte(`{"id":"a","source":"s","type":"t"}`))
	require.NoError(t, err)
	_, ok := ev.Version()
	require.False(t, ok, "no objectversion means no version")
	require.Nil(t, ev.ObjectVersion)
	require.True(t, ev.Time.IsZero())
	require.Empty(t, ev.PartitionKey)
	require.Empty(t, ev.BusinessKey)

	// objectversion as a string (CloudEvents extensions often are) and zero.
	for raw, want := range map[string]int64{
		`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":"41"}`: 41,
		`{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":0}`:    0,
	} {
		ev, err := seqbox.ParseEvent([]byte(raw))
		require.NoError(t, err, raw)
		v, ok := ev.Version()
		require.True(t, ok, raw)
		require.Equal(t, want, v, raw)
	}
}

func TestParseEventInvalid(t *testing.T) {
	tests := []struct {
		name  string
		raw   string
		field string // "" for envelope-level errors
		want  string // substring of the message
	}{
		{"missing id", `{"source":"s","type":"t"}`, "id", "missing"},
		{"empty id", `{"id":"  ","source":"s","type":"t"}`, "id", "empty"},
		{"numeric id", `{"id":5,"source":"s","type":"t"}`, "id", "string"},
		{"missing source", `{"id":"a","type":"t"}`, "source", "missing"},
		{"empty source", `{"id":"a","source":"","type":"t"}`, "source", "empty"},
		{"missing type", `{"id":"a","source":"s"}`, "type", "missing"},
		{"null type", `{"id":"a","source":"s","type":null}`, "type", "string"},
		{"bad specversion", `{"id":"a","source":"s","type":"t","specversion":"0.3"}`, "specversion", "0.3"},
		{"bad time", `{"id":"a","source":"s","type":"t","time":"yesterday"}`, "time", "RFC 3339"},
		{"non-string partitionkey", `{"id":"a","source":"s","type":"t","partitionkey":7}`, "partitionkey", "string"},
		{"non-string businesskey", `{"id":"a","source":"s","type":"t","businesskey":["x"]}`, "businesskey", "string"},
		{"objectversion text", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":"seven"}`, "objectversion", "integer"},
		{"objectversion fraction", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":1.5}`, "objectversion", "integer"},
		{"objectversion bool", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":true}`, "objectversion", "integer"},
		{"objectversion overflow", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":99999999999999999999}`, "objectversion", "integer"},
		{"objectversion negative", `{"id":"a","source":"s","type":"t","partitionkey":"k","objectversion":-1}`, "objectversion", "negative"},
		{"objectversion without partitionkey", `{"id":"a","source":"s","type":"t","objectversion":3}`, "objectversion", "partitionkey"},
		{"bad JSON", `{"id":"a","source":`, "", "JSON"},
		{"JSON array", `[{"id":"a","source":"s","type":"t"}]`, "", "JSON object"},
		{"JSON null", `null`, "", "JSON object"},
		{"empty body", ``, "", "JSON"},
		{"trailing data", `{"id":"a","source":"s","type":"t"} {"id":"b"}`, "", "trailing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := seqbox.ParseEvent([]byte(tt.raw))
			require.Error(t, err)
			require.ErrorIs(t, err, seqbox.ErrInvalidEvent)
			var ie *seqbox.InvalidEventError
			require.True(t, errors.As(err, &ie), "want *InvalidEventError, got %T", err)
			require.Equal(t, tt.field, ie.Field)
			if tt.field != "" {
				require.Contains(t, err.Error(), "invalid event: "+tt.field+": ", "the message names the field")
			}
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseEventOversized(t *testing.T) {
	pad := strings.Repeat("x", seqbox.MaxEventSize)
	_, err := seqbox.ParseEvent([]byte(`{"id":"a","source":"s","type":"t","data":"` + pad + `"}`))
	require.ErrorIs(t, err, seqbox.ErrInvalidEvent)
	require.Contains(t, err.Error(), "limit")
}

func TestParseEventHash(t *testing.T) {
	hash := func(t *testing.T, raw string) string {
		t.Helper()
		ev, err := seqbox.ParseEvent([]byte(raw))
		require.NoError(t, err, raw)
		return ev.Hash
	}
	base := hash(t, `{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A"}}`)

	t.Run("volatile attributes are ignored", func(t *testing.T) {
		for _, raw := range []string{
			`{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A"},"publishedat":"2026-10-09T12:00:00Z"}`,
			`{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A"},"publishedat":"2026-10-10T08:30:00Z"}`,
			`{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A"},"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
			`{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A"},"tracestate":"vendor=1"}`,
		} {
			require.Equal(t, base, hash(t, raw), raw)
		}
	})
	t.Run("key order and whitespace are ignored", func(t *testing.T) {
		require.Equal(t, base, hash(t, `{ "data" : { "sku" : "A" , "qty" : 10 } ,
			"type":"order.placed",	"source":"crm", "id":"evt-482" }`))
	})
	t.Run("data changes the hash", func(t *testing.T) {
		require.NotEqual(t, base, hash(t, `{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":12,"sku":"A"}}`))
		require.NotEqual(t, base, hash(t, `{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A","extra":true}}`))
		require.NotEqual(t, base, hash(t, `{"id":"evt-482","source":"crm","type":"order.placed"}`))
	})
	t.Run("identity and other attributes change the hash", func(t *testing.T) {
		require.NotEqual(t, base, hash(t, `{"id":"evt-483","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A"}}`))
		require.NotEqual(t, base, hash(t, `{"id":"evt-482","source":"erp","type":"order.placed","data":{"qty":10,"sku":"A"}}`))
		require.NotEqual(t, base, hash(t, `{"id":"evt-482","source":"crm","type":"order.placed","data":{"qty":10,"sku":"A"},"businesskey":"b"}`))
	})
}
