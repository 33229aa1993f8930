// Package reconciler is the skeleton every metalshift reconciler starts
// from, the pattern of Cluster API's own providers in a few functions:
//
//	func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
//		obj := &v1.Thing{}
//		if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
//			return ctrl.Result{}, client.IgnoreNotFound(err)
//		}
//		cluster := ... // the owner Cluster, nil when there is none yet
//		run, stop, err := reconciler.Begin(ctx, r.Client, cluster, obj, v1.ReadyCondition)
//		if stop || err != nil {
//			return ctrl.Result{}, err // paused: the Paused condition says why
//		}
//		defer run.End(ctx, &reterr)
//		s := &scope{obj: obj, cluster: cluster}
//		return reconciler.Phases(ctx, s, r.reconcileA, r.reconcileB)
//	}
//
// Begin sets the Paused condition (Cluster API's util/paused: the Cluster's
// spec.paused or the object's cluster.x-k8s.io/paused annotation) and stops
// a paused object there; End patches the object once — the conditions it
// owns, then the rest of the status — and moves status.observedGeneration
// to the generation only when the reconcile succeeded, so that a client
// reading observedGeneration == generation knows the conditions describe
// the current spec. Phases runs the reconcile's steps in order over one
// scope, stops at the first error, and requeues at the soonest a step asked.
//
// An object that belongs to no Cluster (a BareMetalHost, an Agent, an
// InfraEnv, a Provisioning) starts with Start instead of Begin: nothing
// pauses it, and End writes what changed as patches of the changed fields
// only, with no resourceVersion. Each status field has one writer, so two
// writers of one object never undo each other's fields. Start takes the
// metav1 condition types the reconciler owns (OwnedConditions), merged
// with other writers' conditions as Begin does; a status field that has
// two writers all the same (a list of hive-style conditions another
// component adds to) is written under the lock (LockStatus), End then
// reporting a lost conflict for RequeueOnConflict. A write that must
// hold an optimistic lock (an Update, a patch with a resourceVersion) turns
// a conflict into a requeue with RequeueOnConflict: never a dropped write.
//
// Controllers using it watch with predicates.ResourceHasFilterLabel, not
// ResourceNotPausedAndHasFilterLabel: a paused object must still be
// reconciled once, for its Paused condition to turn True.
package reconciler
