package dynamo

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// WithMiddleware is a client option (for NewClient and Open) that adds
// fns to every operation's middleware stack: tracing adds its span
// middleware here (telemetry.Tracer.AddAWSMiddleware).
func WithMiddleware(fns ...func(*middleware.Stack) error) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, fns...) }
}
