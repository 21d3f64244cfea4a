//go:build sizemain && withtelemetry

package main

import (
	"log"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/telemetry"
)

func dynamoOptions(d *gateway.Options) []func(*dynamodb.Options) {
	tel, _, err := telemetry.FromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	d.Tracer, d.Logger, d.Metrics = tel.Tracer, tel.Logger, tel.Metrics
	return []func(*dynamodb.Options){dynamo.WithMiddleware(tel.Tracer.AddAWSMiddleware)}
}
