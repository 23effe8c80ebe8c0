package app

import (
	"context"
	"errors"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2"
)

// errLeadershipLost is returned when another replica took the lease: the
// process stops its work and exits so that it starts again as a candidate.
var errLeadershipLost = errors.New("leader election lost")

// runAsLeader runs work only while holding the Lease. Losing the lease
// cancels work's context and, once work has returned, returns
// errLeadershipLost. Cancelling ctx releases the lease. leader (may be nil)
// is 1 from winning the lease until losing or releasing it. A Lease that is
// missing and may not be created ends the election with errLeaseMissing.
func runAsLeader(ctx context.Context, kube kubernetes.Interface, cfg componentbaseconfig.LeaderElectionConfiguration, leader *leaderGauge, work func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	identity := os.Getenv("POD_NAME")
	if identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("choosing a leader election identity: %w", err)
		}
		identity = host
	}
	identity += "_" + string(uuid.NewUUID())

	leading := make(chan context.Context, 1)
	electorCtx, stopElector := context.WithCancel(ctx)
	defer stopElector()
	lock := newLeaseLock(&resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.ResourceNamespace, Name: cfg.ResourceName},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}, stopElector)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration.Duration,
		RenewDeadline:   cfg.RenewDeadline.Duration,
		RetryPeriod:     cfg.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            UserAgent,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				leader.set(true)
				leading <- leaderCtx
			},
			OnStoppedLeading: func() {
				leader.set(false)
				logger.Info("No longer the leader", "identity", identity)
			},
			OnNewLeader: func(current string) {
				if current != identity {
					logger.Info("Another replica leads", "leader", current)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}
	logger.Info("Waiting for the lease", "lease", klog.KRef(cfg.ResourceNamespace, cfg.ResourceName), "identity", identity)
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		elector.Run(electorCtx)
	}()

	select {
	case <-electorDone:
		// Never led: the Lease is missing, or shut down before winning it.
		if err := lock.Missing(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		return errLeadershipLost
	case leaderCtx := <-leading:
		logger.Info("Became the leader", "identity", identity)
		workErr := work(leaderCtx)
		// Work returns when the lease is lost (or deleted) or ctx is
		// cancelled, or on its own error; in each case give the lease up
		// and wait.
		stopElector()
		<-electorDone
		switch {
		case workErr != nil:
			return workErr
		case ctx.Err() != nil:
			return nil
		}
		if err := lock.Missing(); err != nil {
			// The Lease was deleted under the leader.
			return err
		}
		return errLeadershipLost
	}
}
