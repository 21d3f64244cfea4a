package dynamo

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// WithMiddleware is a client option (for NewClient and Open) that adds
// fns to every operation's middleware stack: tracing adds its span
// middleware here (telemetry.Tracer.AddAWSMiddleware).
func WithMiddleware(fns ...func(*middleware.Stack) error) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, fns...) }
}

// opDeadline gives every operation d from its start: it is the first
// middleware of the Initialize step, so the retry loop (Finalize) and the
// reading of the answer (Deserialize) run inside it. The caller's earlier
// deadline, or its cancellation, still ends the operation first.
func opDeadline(d time.Duration) func(*middleware.Stack) error {
	return func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("aegis-op-deadline",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				ctx, cancel := context.WithTimeout(ctx, d)
				defer cancel()
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	}
}
