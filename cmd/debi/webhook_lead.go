package main

import (
	"context"
	"reflect"
	"sync"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/process"
)

// The webhook process campaigns for one Lease, webhook.leader_election (default
// debi-system/debi-webhook), as a controller-runtime manager does. Its holder does what one
// replica only may do: the Tidal watch, the HPA owner of HPA-algorithm ElasticScalers and the
// ElasticScaler status writer's validation. Every replica serves the notifications, reads the
// ElasticScalers' policies and reports its decisions.

// lead campaigns for the process's Lease while the configuration in force has work for a
// leader (the Tidal watch, or global.elastic_scalers), until ctx ends. A reload does not hand
// the Lease over: the holder restarts its Tidal watch with the new configuration and keeps the
// Lease. Only a reload that changes webhook.leader_election, or turns the leader's work on or
// off, ends the campaign (releasing the Lease) and starts it again.
func (s *webhookServer) lead(ctx context.Context) error {
	for {
		g := s.current.Load()
		le, need := g.cfg.Webhook.LeaderElection, s.needsLeader(g.cfg)
		cctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.campaign(cctx, le, need) }()
		for changed := false; !changed; {
			select {
			case <-ctx.Done():
				stop()
				return <-done
			case err := <-done:
				stop()
				return err
			case <-s.reloaded:
				cfg := s.current.Load().cfg
				changed = !reflect.DeepEqual(cfg.Webhook.LeaderElection, le) || s.needsLeader(cfg) != need
			}
		}
		stop()
		if err := <-done; err != nil {
			return err
		}
		s.logger.Info("campaigning again: the reload changed webhook.leader_election or the leader's work")
	}
}

// needsLeader says whether cfg gives the Lease holder work to do.
func (s *webhookServer) needsLeader(cfg *config.Config) bool {
	return cfg.Webhook.Tidal.IsEnabled() || s.scalers != nil
}

// campaign runs the leader's work (leading) while this replica holds the Lease le — at once
// with leader election off — until ctx ends; with no work for a leader it waits for ctx.
func (s *webhookServer) campaign(ctx context.Context, le config.LeaderElectionConfig, need bool) error {
	if !need {
		<-ctx.Done()
		return nil
	}
	if !le.IsEnabled() {
		s.setLeader(true)
		defer s.setLeader(false)
		s.leading(ctx)
		return nil
	}
	return process.RunLeaderElected(ctx, s.act.Kube(), le, s.id, s.logger, s.setLeader, s.leading)
}

// setLeader reports whether this replica holds the Lease: debi_webhook_leader and the status
// writer's validation.
func (s *webhookServer) setLeader(leading bool) {
	s.m.SetLeader(leading)
	s.scalers.SetLeader(leading)
}

// leading is the Lease holder's work, until ctx ends (the Lease lost or the process stopping).
func (s *webhookServer) leading(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.superviseWatch(ctx) })
	wg.Go(func() { s.scalers.Lead(ctx) })
	wg.Wait()
}

// signalReload tells the Tidal watch and the campaign that a configuration was put in force.
// A signal already pending covers this one: both read the configuration in force when they
// wake.
func (s *webhookServer) signalReload() {
	for _, c := range []chan struct{}{s.restart, s.reloaded} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// superviseWatch runs the Tidal watch of the configuration in force until ctx ends, and starts
// it again after each reload. A watch that ends by itself (disabled, or its resources not
// served) is started again by the next reload.
func (s *webhookServer) superviseWatch(ctx context.Context) {
	defer s.logger.Info("tidal watch stopped")
	select { // a reload while not leading: the configuration in force is read below anyway
	case <-s.restart:
	default:
	}
	for {
		g := s.current.Load()
		wc := g.cfg.Webhook
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if wc.Tidal.IsEnabled() {
				g.ctl.WatchTidals(wctx, s.informers, wc.Tidal)
			}
		}()
		select {
		case <-ctx.Done():
		case <-done:
			select {
			case <-ctx.Done():
			case <-s.restart:
			}
		case <-s.restart:
			s.logger.Info("restarting the tidal watch with the reloaded configuration")
		}
		stop()
		<-done
		if ctx.Err() != nil {
			return
		}
	}
}
