// Package otelenv builds the OpenTelemetry tracer provider that the
// standard OTEL_* environment variables ask for, for seqbox's commands
// (seqbox serve): spans go out over OTLP/HTTP when the variables say so,
// and nothing is exported otherwise (docs/design.md §22).
package otelenv

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Tracing is the tracer provider the environment asked for.
type Tracing struct {
	// Provider is nil when nothing is to be exported.
	Provider trace.TracerProvider
	// Endpoint says where spans go, for the log line ("" when nowhere).
	Endpoint string
	sdk      *sdktrace.TracerProvider
}

// Shutdown flushes the spans not yet exported and stops the exporter.
func (t Tracing) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// FromEnv reads the standard variables through getenv:
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: nothing.
//   - OTEL_TRACES_EXPORTER=otlp, or (with it unset)
//     OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
//     set: OTLP over HTTP (protobuf), configured by the exporter's own
//     OTEL_EXPORTER_OTLP_* variables (endpoint, headers, timeout,
//     compression, certificates).
//   - OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the resource
//     (service.name defaults to "seqbox"); OTEL_TRACES_SAMPLER and
//     OTEL_BSP_* tune sampling and batching.
//
// Anything it cannot honour (another exporter or protocol) is an error
// that names the variable, never a silent fallback.
func FromEnv(ctx context.Context, getenv func(string) string, version string) (Tracing, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return Tracing{}, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return Tracing{}, nil
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return Tracing{}, nil
		}
	case "otlp":
	default:
		return Tracing{}, fmt.Errorf("OTEL_TRACES_EXPORTER=%q is not supported: seqbox exports traces with otlp (or none)", exp)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(name); p != "" {
			if p != "http/protobuf" {
				return Tracing{}, fmt.Errorf("%s=%q is not supported: seqbox exports OTLP over http/protobuf", name, p)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return Tracing{}, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("seqbox"), semconv.ServiceVersion(version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return Tracing{}, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return Tracing{Provider: sdk, Endpoint: endpoint(getenv), sdk: sdk}, nil
}

// endpoint is where the exporter sends spans, as the variables say.
func endpoint(getenv func(string) string) string {
	if e := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); e != "" {
		return e
	}
	if e := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); e != "" {
		return strings.TrimSuffix(e, "/") + "/v1/traces"
	}
	return "https://localhost:4318/v1/traces (the OTLP default)"
}
