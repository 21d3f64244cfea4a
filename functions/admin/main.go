// Command admin is the AdminFunction: aegis's admin API (/admin/v1/...)
// behind API Gateway's HTTP API, whose routes use IAM authorization. The
// handler trusts that authorization and nothing else: the principal is the
// one API Gateway verified (apigw.IAMPrincipal).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/aegis-gw/aegis/shared/apigw"
	"github.com/aegis-gw/aegis/shared/wiring"
)

func main() {
	h, err := wiring.LambdaAdmin(context.Background(), os.Getenv, apigw.IAMPrincipal)
	if err != nil {
		fmt.Fprintln(os.Stderr, "aegis admin function: refusing to start:", err)
		os.Exit(1)
	}
	lambda.Start(apigw.Handler(h))
}
