// Command workload is the node tests' application: an HTTP server whose readiness the kubelet probes, and which
// can be told to fail the ways real applications do.
//
//	workload [-addr :8080] [-crash] [-never-ready]   serve / (a greeting) and /readyz
//	workload -get URL                                fetch URL once and exit 0 on 200 (a client pod)
//
// -crash exits with status 1 at once (a crash loop under a Deployment); -never-ready serves but answers /readyz
// with 503 forever (a rollout that never becomes available).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", ":8080", "listen address")
	crash := flag.Bool("crash", false, "exit with status 1 at once")
	neverReady := flag.Bool("never-ready", false, "answer /readyz with 503 forever")
	get := flag.String("get", "", "fetch this URL and exit (0 on HTTP 200)")
	message := flag.String("message", "hello", "what / answers")
	flag.Parse()
	switch {
	case *get != "":
		if err := fetch(*get); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case *crash:
		fmt.Fprintln(os.Stderr, "workload: crashing as told (-crash)")
		os.Exit(1)
	default:
		if err := serve(*addr, *message, !*neverReady); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// serve answers until SIGTERM, then shuts down gracefully, as the kubelet expects within the grace period.
func serve(addr, message string, ready bool) error {
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready {
			http.Error(w, "never ready (-never-ready)", http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintf(w, "%s from %s\n", message, host)
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	fmt.Println("workload: listening on", addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func fetch(url string) error {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("GET %s: %s\n%s", url, resp.Status, body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
