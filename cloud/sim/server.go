package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/minictl/minictl/internal/serving"
)

// maxBody bounds every request body: the biggest thing the cloud takes is
// a load balancer with a thousand backends.
const maxBody = 1 << 20

// Handler is the cloud's HTTP API:
//
//	GET    /healthz
//	GET    /v1/instances[?name=]     POST /v1/instances
//	GET    /v1/instances/{id}        DELETE /v1/instances/{id}
//	POST   /v1/instances/{id}/stop   POST /v1/instances/{id}/start
//	GET    /v1/loadbalancers         GET|PUT|DELETE /v1/loadbalancers/{name}
//	GET    /v1/routes                PUT|DELETE /v1/routes/{name}
//	GET|PUT|DELETE /v1/faults
//
// Bodies are JSON; errors are an Error in JSON with its status code.
func (c *Cloud) Handler() http.Handler {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, newError(http.StatusNotFound, "no such path %s", r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, newError(http.StatusMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path))
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	r.Route("/v1/faults", func(r chi.Router) {
		r.Get("/", c.getFaults)
		r.Put("/", c.putFaults)
		r.Delete("/", c.deleteFaults)
	})
	r.Group(func(r chi.Router) {
		r.Use(c.faulty)
		r.Get("/v1/instances", c.listInstances)
		r.Post("/v1/instances", c.createInstance)
		r.Get("/v1/instances/{id}", c.getInstance)
		r.Delete("/v1/instances/{id}", c.deleteInstance)
		r.Post("/v1/instances/{id}/stop", c.stopInstance)
		r.Post("/v1/instances/{id}/start", c.startInstance)
		r.Get("/v1/loadbalancers", c.listLBs)
		r.Get("/v1/loadbalancers/{name}", c.getLB)
		r.Put("/v1/loadbalancers/{name}", c.putLB)
		r.Delete("/v1/loadbalancers/{name}", c.deleteLB)
		r.Get("/v1/routes", c.listRoutes)
		r.Put("/v1/routes/{name}", c.putRoute)
		r.Delete("/v1/routes/{name}", c.deleteRoute)
	})
	return r
}

// Serve answers the API on ln until ctx ends, then stops, giving calls in
// flight a few seconds to finish. A slow fault's wait ends with ctx.
func (c *Cloud) Serve(ctx context.Context, ln net.Listener) error {
	srv := serving.Timeouts{
		Read:  time.Minute,                 // a body is at most maxBody; no one needs longer to send it
		Write: maxFaultDelay + time.Minute, // a slow fault holds an answer up to maxFaultDelay
		Idle:  2 * time.Minute,
	}.Server(c.Handler())
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	if err := srv.Run(ctx, ln, 5*time.Second); err != nil {
		return fmt.Errorf("cloud: serve: %w", err)
	}
	return nil
}

// faulty makes the calls it wraps obey the fault switch.
func (c *Cloud) faulty(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode, delay := c.activeFault(); mode {
		case FaultUnavailable:
			w.Header().Set("Retry-After", "1")
			writeError(w, newError(http.StatusServiceUnavailable, "the cloud is unavailable (fault switch on)"))
			return
		case FaultSlow:
			t := c.clock.NewTimer(delay)
			select {
			case <-t.C():
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (c *Cloud) listInstances(w http.ResponseWriter, r *http.Request) {
	items := c.Instances()
	if name := r.URL.Query().Get("name"); name != "" {
		var only []Instance
		for _, in := range items {
			if in.Name == name {
				only = append(only, in)
			}
		}
		items = only
	}
	writeJSON(w, http.StatusOK, list(items))
}

func (c *Cloud) createInstance(w http.ResponseWriter, r *http.Request) {
	var spec InstanceSpec
	if !readJSON(w, r, &spec) {
		return
	}
	in, err := c.CreateInstance(spec)
	reply(w, http.StatusCreated, in, err)
}

func (c *Cloud) getInstance(w http.ResponseWriter, r *http.Request) {
	in, err := c.Instance(chi.URLParam(r, "id"))
	reply(w, http.StatusOK, in, err)
}

func (c *Cloud) deleteInstance(w http.ResponseWriter, r *http.Request) {
	reply(w, http.StatusNoContent, nil, c.DeleteInstance(chi.URLParam(r, "id")))
}

func (c *Cloud) stopInstance(w http.ResponseWriter, r *http.Request) {
	in, err := c.StopInstance(chi.URLParam(r, "id"))
	reply(w, http.StatusOK, in, err)
}

func (c *Cloud) startInstance(w http.ResponseWriter, r *http.Request) {
	in, err := c.StartInstance(chi.URLParam(r, "id"))
	reply(w, http.StatusOK, in, err)
}

func (c *Cloud) listLBs(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, list(c.LoadBalancers()))
}

func (c *Cloud) getLB(w http.ResponseWriter, r *http.Request) {
	lb, err := c.LoadBalancer(chi.URLParam(r, "name"))
	reply(w, http.StatusOK, lb, err)
}

func (c *Cloud) putLB(w http.ResponseWriter, r *http.Request) {
	var spec LoadBalancerSpec
	if !readJSON(w, r, &spec) {
		return
	}
	lb, created, err := c.PutLoadBalancer(chi.URLParam(r, "name"), spec)
	reply(w, createdOrOK(created), lb, err)
}

func (c *Cloud) deleteLB(w http.ResponseWriter, r *http.Request) {
	reply(w, http.StatusNoContent, nil, c.DeleteLoadBalancer(chi.URLParam(r, "name")))
}

func (c *Cloud) listRoutes(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, list(c.Routes()))
}

func (c *Cloud) putRoute(w http.ResponseWriter, r *http.Request) {
	var spec RouteSpec
	if !readJSON(w, r, &spec) {
		return
	}
	rt, created, err := c.PutRoute(chi.URLParam(r, "name"), spec)
	reply(w, createdOrOK(created), rt, err)
}

func (c *Cloud) deleteRoute(w http.ResponseWriter, r *http.Request) {
	reply(w, http.StatusNoContent, nil, c.DeleteRoute(chi.URLParam(r, "name")))
}

func (c *Cloud) getFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, c.Faults())
}

func (c *Cloud) putFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	if !readJSON(w, r, &f) {
		return
	}
	if f.Until != nil {
		writeError(w, newError(http.StatusUnprocessableEntity, "faults %q is invalid: until: Forbidden: set by the cloud from duration", f.Mode))
		return
	}
	out, err := c.SetFaults(f)
	reply(w, http.StatusOK, out, err)
}

func (c *Cloud) deleteFaults(w http.ResponseWriter, _ *http.Request) {
	c.ClearFaults()
	writeJSON(w, http.StatusOK, c.Faults())
}

// List is the shape of every list the API answers.
type List[T any] struct {
	Items []T `json:"items"`
}

func list[T any](items []T) List[T] {
	if items == nil {
		items = []T{}
	}
	return List[T]{Items: items}
}

func createdOrOK(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// readJSON decodes the body into v, strictly: an unknown field, a second
// value or a body over maxBody is a 400 (413 for the size), answered here.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, newError(http.StatusRequestEntityTooLarge, "request body is larger than %d bytes", maxBody))
		return false
	case errors.Is(err, io.EOF):
		writeError(w, newError(http.StatusBadRequest, "request body is empty; expected a JSON object"))
		return false
	case err != nil:
		writeError(w, newError(http.StatusBadRequest, "request body is not valid: %v", err))
		return false
	}
	return true
}

func reply(w http.ResponseWriter, code int, v any, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	if code == http.StatusNoContent {
		w.WriteHeader(code)
		return
	}
	writeJSON(w, code, v)
}

func writeError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = newError(http.StatusInternalServerError, "%v", err)
	}
	writeJSON(w, e.Code, e)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
