package main

import (
	"context"
	"fmt"
	"io"
)

func runForecast(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "debi forecast: not wired yet")
	return 1
}

func runExporter(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "debi exporter: not wired yet")
	return 1
}

func runWebhook(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "debi webhook: not wired yet")
	return 1
}
