package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	events "k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentinstallv1 "github.com/metalshift/metalshift/api/agentinstall/v1beta1"
	assistedapi "github.com/metalshift/metalshift/api/assisted/v2"
	hiveextv1 "github.com/metalshift/metalshift/api/hiveext/v1beta1"
	"github.com/metalshift/metalshift/imageservice"
	"github.com/metalshift/metalshift/internal/shard"
)

// UIDIndex indexes InfraEnvs and AgentClusterInstalls by UID: their IDs in
// the REST API.
const UIDIndex = "metadata.uid"

// IndexUID is the index function of UIDIndex.
func IndexUID(o client.Object) []string { return []string{string(o.GetUID())} }

// Options configure a Server.
type Options struct {
	// Client reads and writes the agent-install objects; its cache must
	// index InfraEnvs and AgentClusterInstalls by UIDIndex. Secrets are read
	// from the API.
	Client client.Client
	// APIReader reads what the cache must not hold (Events).
	APIReader client.Reader
	// Key signs agent tokens and image URLs.
	Key []byte
	// BaseURL is how hosts reach this server.
	BaseURL string
	// CA returns the PEM hosts trust for BaseURL (https), which discovery
	// images carry; nil, or nil PEM, for plain http.
	CA func() []byte
	// DeployCA returns the PEM hosts trust for DeployURL, which
	// converged-flow images carry; nil, or nil PEM, for plain http.
	DeployCA func() []byte
	// Clock tells the time; nil means the real clock.
	Clock clock.PassiveClock
	// PollInterval is next_instruction_seconds; 0 means 60s, as upstream.
	PollInterval time.Duration
	// Images are the live images discovery images are made of; nil means
	// the light images (simulated machines only).
	Images *imageservice.Images
	// HeartbeatEvery is how stale an Agent's recorded last contact may get
	// before a call from its agent records it again; 0 means a minute. It
	// must be well below the controllers' disconnection timeout.
	HeartbeatEvery time.Duration
	// DeployURL is the host engine's deploy server, as hosts reach it. The
	// images of InfraEnvs annotated enable-ironic-agent (the converged
	// flow) carry it with a lookup credential; empty: they cannot be made.
	DeployURL string
	// Recorder records what agents report that a person should see (a
	// converged-flow image booted by hand, a registration refused); nil
	// records nothing.
	Recorder events.EventRecorder
	// MaxAgentsPerInfraEnv caps the Agents registered from one InfraEnv's
	// image (counted in the cache, so a burst may pass it by a few); 0
	// means DefaultMaxAgentsPerInfraEnv.
	MaxAgentsPerInfraEnv int
	// WatchFilterValue is the shard of the server's manager (package
	// shard): the server answers for the InfraEnvs and AgentClusterInstalls
	// labelled cluster.x-k8s.io/watch-filter=<value> only, as if the others
	// did not exist; empty means all.
	WatchFilterValue string
}

// DefaultMaxAgentsPerInfraEnv is the default of
// Options.MaxAgentsPerInfraEnv: above any one cluster's hosts, and a
// bound on what a copy of an image can fill the hub with.
const DefaultMaxAgentsPerInfraEnv = 1000

// Server serves discovery agents and images. Create it with New.
type Server struct {
	opts Options
}

// New returns a Server.
func New(opts Options) (*Server, error) {
	if len(opts.Key) < 16 {
		return nil, errors.New("the agent service needs a signing key of at least 16 bytes")
	}
	if opts.MaxAgentsPerInfraEnv <= 0 {
		opts.MaxAgentsPerInfraEnv = DefaultMaxAgentsPerInfraEnv
	}
	if opts.HeartbeatEvery <= 0 {
		opts.HeartbeatEvery = time.Minute
	}
	if opts.APIReader == nil {
		opts.APIReader = opts.Client
	}
	if opts.BaseURL == "" {
		return nil, errors.New("the agent service needs its URL")
	}
	opts.BaseURL = strings.TrimSuffix(opts.BaseURL, "/")
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 60 * time.Second
	}
	if opts.Images == nil {
		im, err := imageservice.LightImages()
		if err != nil {
			return nil, err
		}
		opts.Images = im
	}
	return &Server{opts: opts}, nil
}

// BaseURL is how hosts reach the server.
func (s *Server) BaseURL() string { return s.opts.BaseURL }

// Handler serves the REST API and the images.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	api := assistedapi.BasePath + "/v2"
	// Every route caps its body; GETs read none.
	mux.HandleFunc("POST "+api+"/infra-envs/{ie}/hosts", limit(maxSmallBody, s.register))
	mux.HandleFunc("GET "+api+"/infra-envs/{ie}/hosts/{host}/instructions", limit(0, s.instructions))
	mux.HandleFunc("POST "+api+"/infra-envs/{ie}/hosts/{host}/instructions", limit(maxStepReplyBody, s.stepReply))
	mux.HandleFunc("PUT "+api+"/infra-envs/{ie}/hosts/{host}/progress", limit(maxSmallBody, s.progress))
	mux.HandleFunc("PUT "+api+"/infra-envs/{ie}/hosts/{host}/logs-progress", limit(maxSmallBody, s.logsProgress))
	mux.HandleFunc("GET "+api+"/clusters/{cluster}/downloads/files", limit(0, s.files))
	mux.HandleFunc("POST "+api+"/clusters/{cluster}/logs", limit(maxLogsBody, s.logs))
	mux.HandleFunc("GET "+assistedapi.EventsPath, limit(0, s.events))
	mux.HandleFunc("POST "+fmt.Sprintf(assistedapi.ManualBootPath, "{ie}"), limit(maxSmallBody, s.manualBoot))
	s.imageRoutes(mux)
	return mux
}

// apiError writes upstream's error shape. The connection closes after
// it: a body the handler did not read (a refused request's) is not read
// either.
func apiError(w http.ResponseWriter, code int, reason string) {
	w.Header().Set("Connection", "close")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(assistedapi.Error{Kind: "Error", ID: int32(code), //nolint:gosec // an HTTP status code
		Code: fmt.Sprint(code), Reason: reason})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// infraEnv authenticates a request with the X-Secret-Key of InfraEnv id and
// returns the InfraEnv; it has answered the request when ok is false.
func (s *Server) infraEnv(w http.ResponseWriter, r *http.Request, id string) (*agentinstallv1.InfraEnv, bool) {
	if err := assistedapi.VerifyAgentToken(s.opts.Key, id, r.Header.Get(assistedapi.AuthHeader)); err != nil {
		apiError(w, http.StatusUnauthorized, "invalid or missing "+assistedapi.AuthHeader)
		return nil, false
	}
	ie, err := s.infraEnvByID(r.Context(), id)
	if err != nil {
		if apierrors.IsNotFound(err) {
			apiError(w, http.StatusNotFound, fmt.Sprintf("infra env %s not found", id))
		} else {
			apiError(w, http.StatusInternalServerError, err.Error())
		}
		return nil, false
	}
	return ie, true
}

func (s *Server) infraEnvByID(ctx context.Context, id string) (*agentinstallv1.InfraEnv, error) {
	l := &agentinstallv1.InfraEnvList{}
	if err := s.opts.Client.List(ctx, l, client.MatchingFields{UIDIndex: id}); err != nil {
		return nil, err
	}
	if len(l.Items) != 1 || l.Items[0].DeletionTimestamp != nil || !shard.Owns(s.opts.WatchFilterValue, &l.Items[0]) {
		return nil, apierrors.NewNotFound(agentinstallv1.GroupVersion.WithResource("infraenvs").GroupResource(), id)
	}
	return &l.Items[0], nil
}

func (s *Server) clusterByID(ctx context.Context, id string) (*hiveextv1.AgentClusterInstall, error) {
	l := &hiveextv1.AgentClusterInstallList{}
	if err := s.opts.Client.List(ctx, l, client.MatchingFields{UIDIndex: id}); err != nil {
		return nil, err
	}
	if len(l.Items) != 1 || !shard.Owns(s.opts.WatchFilterValue, &l.Items[0]) {
		return nil, apierrors.NewNotFound(hiveextv1.GroupVersion.WithResource("agentclusterinstalls").GroupResource(), id)
	}
	return &l.Items[0], nil
}
