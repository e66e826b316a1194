package otelenv

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnvExportsOnlyWhenAsked(t *testing.T) {
	ctx := context.Background()
	for _, m := range []map[string]string{
		{},
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
		{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
		{"OTEL_SERVICE_NAME": "orders"},
	} {
		tr, err := FromEnv(ctx, env(m), "test")
		require.NoError(t, err, "%v", m)
		require.Nil(t, tr.Provider, "%v: nothing is exported", m)
		require.NoError(t, tr.Shutdown(ctx))
	}
	for _, m := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"},
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
	} {
		tr, err := FromEnv(ctx, env(m), "test")
		require.NoError(t, err, "%v", m)
		require.NotNil(t, tr.Provider, "%v: OTLP/HTTP", m)
		require.Contains(t, tr.Endpoint, "/v1/traces")
		require.NoError(t, tr.Shutdown(ctx))
	}
}

func TestFromEnvRefusesWhatItCannotHonour(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, `OTEL_TRACES_EXPORTER="zipkin" is not supported`},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			`OTEL_EXPORTER_OTLP_PROTOCOL="grpc" is not supported`},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/json" is not supported`},
	} {
		_, err := FromEnv(context.Background(), env(c.env), "test")
		require.ErrorContains(t, err, c.want)
	}
}
