package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxdeployer/fluxdeployer/internal/ui"
)

func newUICommand() *cobra.Command {
	var flags clusterFlags
	var addr, externalURL string
	var allowRemote, actions bool
	cmd := &cobra.Command{
		Use:   "ui [--addr 127.0.0.1:9333] [-n NAMESPACE | -A] [--actions]",
		Short: "Serve a live, read-only web view of the landscapes you may read",
		Long: "Serves, on --addr (loopback only unless --allow-remote), a web view of every VectorDeployment and Stage the\n" +
			"kubeconfig's user may read (-n: in one namespace, -A: in every namespace), what each became down to the\n" +
			"workloads' pods, and their events; pages update live. It reads with your credentials only, the kinds your RBAC\n" +
			"lets you list and watch, and never a Secret or a ConfigMap. --actions adds reconcile, suspend and resume,\n" +
			"sent as you. Stops on Ctrl-C.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkListen(addr, allowRemote, cmd); err != nil {
				return err
			}
			c, err := flags.connect()
			if err != nil {
				return err
			}
			scheme, err := newScheme()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			listener, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			server, err := ui.Run(ctx, ui.Options{Config: c.config, Scheme: scheme, Namespace: c.namespace, Actions: actions,
				Addr: listener.Addr().String(), ExternalURL: externalURL, Log: log})
			if err != nil {
				_ = listener.Close()
				return c.explain(err)
			}
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "serving the view of %s on http://%s/ (Ctrl-C stops it)\n", c.server, listener.Addr())
			srv := &http.Server{Handler: server, ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-ctx.Done()
				shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(shutdown)
			}()
			if err := srv.Serve(listener); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	flags.bind(cmd.Flags())
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:9333", "address to serve the view on")
	cmd.Flags().BoolVar(&allowRemote, "allow-remote", false, "allow a non-loopback --addr: anyone who reaches it reads what your credentials read")
	cmd.Flags().BoolVar(&actions, "actions", false, "offer reconcile, suspend and resume on the pages, sent as you")
	cmd.Flags().StringVar(&externalURL, "external-url", "", "the URL users reach the view at, behind a proxy (its host is accepted)")
	return cmd
}

// checkListen refuses an address other hosts can reach, unless allowRemote: the view reads with the user's own
// credentials, so whoever reaches it reads what the user may read.
func checkListen(addr string, allowRemote bool, cmd *cobra.Command) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageErrorf("--addr %q: %v", addr, err)
	}
	ip := net.ParseIP(host)
	if host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	if !allowRemote {
		return usageErrorf("--addr %s is not a loopback address: anyone who reaches it would read what your credentials read; pass --allow-remote to serve it anyway", addr)
	}
	_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "warning: serving on %s: anyone who reaches it reads what your credentials read\n", addr)
	return nil
}
