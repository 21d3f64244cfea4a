package telemetry

import (
	"context"
	"errors"
	"reflect"
	"slices"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// awsSpanID is the middleware's id in the stack.
const awsSpanID = "aegis.telemetry.Span"

// AddAWSMiddleware adds to an AWS SDK v2 client's stack (APIOptions) a
// middleware that wraps each operation, retries included, in one client
// span named "<Service>.<Operation>" (e.g. "DynamoDB.GetItem") carrying the
// table name(s), region, request id and HTTP status. Item contents, keys
// and expressions are never recorded. It is safe to call on a nil *Tracer
// (tracing off): then it adds nothing.
//
//	dynamo.NewClient(ctx, nil, dynamo.WithMiddleware(tr.AddAWSMiddleware))
func (t *Tracer) AddAWSMiddleware(stack *middleware.Stack) error {
	if t == nil {
		return nil
	}
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc(awsSpanID, t.awsSpan), middleware.After)
}

func (t *Tracer) awsSpan(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	service, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, AttrRPCSystem.String("aws-api"), AttrAWSService.String(service), AttrAWSOp.String(op))
	if r := awsmiddleware.GetRegion(ctx); r != "" {
		attrs = append(attrs, AttrAWSRegion.String(r))
	}
	if tables := tableNames(in.Parameters); len(tables) > 0 {
		attrs = append(attrs, AttrTable.StringSlice(tables))
	}
	ctx, span := t.t.Start(ctx, service+"."+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	out, md, err := next.HandleInitialize(ctx, in)
	if id, ok := awsmiddleware.GetRequestIDMetadata(md); ok && id != "" {
		span.SetAttributes(AttrAWSReqID.String(id))
	}
	if resp, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok && resp != nil {
		span.SetAttributes(AttrHTTPStatus.Int(resp.StatusCode))
	}
	if err != nil {
		msg := "request failed"
		var ae smithy.APIError
		if errors.As(err, &ae) {
			msg = ae.ErrorCode() // a code, not the message: messages may quote input
			if isThrottle(msg) {
				span.SetAttributes(AttrAWSThrottle.Bool(true))
			}
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
	return out, md, err
}

func isThrottle(code string) bool {
	return code == "ThrottlingException" || code == "ProvisionedThroughputExceededException" ||
		code == "RequestLimitExceeded" || code == "ThrottledException"
}

// tableNames reads the table name(s) of an operation's input without
// knowing its type: a TableName *string field, or the keys of a
// RequestItems map (batch operations), or the TableName of each item of
// TransactItems.
func tableNames(params any) []string {
	v := reflect.ValueOf(params)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	v = v.Elem()
	if f := v.FieldByName("TableName"); f.IsValid() && f.Kind() == reflect.Pointer && !f.IsNil() && f.Elem().Kind() == reflect.String {
		return []string{f.Elem().String()}
	}
	var out []string
	if f := v.FieldByName("RequestItems"); f.IsValid() && f.Kind() == reflect.Map && f.Type().Key().Kind() == reflect.String {
		for _, k := range f.MapKeys() {
			out = append(out, k.String())
		}
	}
	if f := v.FieldByName("TransactItems"); f.IsValid() && f.Kind() == reflect.Slice {
		for i := 0; i < f.Len(); i++ {
			out = appendTables(out, f.Index(i))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// appendTables finds TableName one level down in a transaction item
// (TransactWriteItem{Put: &Put{TableName: ...}}, TransactGetItem{Get: ...}).
func appendTables(out []string, item reflect.Value) []string {
	if item.Kind() != reflect.Struct {
		return out
	}
	for i := 0; i < item.NumField(); i++ {
		f := item.Field(i)
		if f.Kind() != reflect.Pointer || f.IsNil() || f.Elem().Kind() != reflect.Struct {
			continue
		}
		if tn := f.Elem().FieldByName("TableName"); tn.IsValid() && tn.Kind() == reflect.Pointer && !tn.IsNil() && tn.Elem().Kind() == reflect.String {
			out = append(out, tn.Elem().String())
		}
	}
	return out
}
