//go:build sizemain && !withtelemetry

package main

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aegis-gw/aegis/shared/gateway"
)

func dynamoOptions(*gateway.Options) []func(*dynamodb.Options) { return nil }
