package main

import (
	"context"
	"fmt"
	"io"
)

func runWebhook(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "debi webhook: not wired yet")
	return 1
}
