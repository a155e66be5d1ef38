{{/*
Every template of this library takes (dict "context" $ "config" .Values.pglease): the caller's
root context and its pglease settings. The settings are merged over the defaults below, key by
key, so a caller sets only what differs. README.md lists every key.
*/}}
{{- define "pglease-sidecar.defaults" -}}
# Required: names the ServiceAccount, Role and RoleBinding, and is the default lease name.
name: ""
# Labels for the RBAC objects.
labels: {}
# Rendered by pglease-sidecar.podSpec; must exceed lease.gracePeriod.
terminationGracePeriodSeconds: 30
sidecar:
  native: true
  name: pglease
  image:
    repository: ghcr.io/pglease/pglease
    tag: "0.1.0"
    pullPolicy: IfNotPresent
  httpPort: 8484
  logLevel: info
  startTimeout: 60s
  extraArgs: []
  extraEnv: []
  # Measured: test/chart/sidecar-memory.test.ts (peak resident memory while publishing).
  resources:
    requests:
      cpu: 10m
      memory: 72Mi
    limits:
      memory: 128Mi
  # failureThreshold empty: enough periods to cover startTimeout plus a margin.
  startupProbe:
    httpGet:
      path: /healthz
      port: pglease
    periodSeconds: 1
    timeoutSeconds: 2
  livenessProbe:
    httpGet:
      path: /healthz
      port: pglease
    periodSeconds: 10
    timeoutSeconds: 2
    failureThreshold: 3
  readinessProbe:
    httpGet:
      path: /readyz
      port: pglease
    periodSeconds: 1
    timeoutSeconds: 2
    failureThreshold: 15
  securityContext:
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    runAsNonRoot: true
    capabilities:
      drop: ["ALL"]
    seccompProfile:
      type: RuntimeDefault
lease:
  name: ""
  additional: []
  duration: 15s
  renewInterval: ""
  retryInterval: 2s
  gracePeriod: 20s
  notify: true
  restartTakeover: true
  sessionTakeover: false
  crashTakeover: false
  priority: 0
  preempt: false
  noLead: false
health:
  # Leadership follows the application's health: pod (its containers' ready state), url, or off.
  gate: pod
  # Empty: every container but the sidecar's.
  appContainers: []
  url: ""
  grace: 5s
  settle: 30s
  strict: false
  waitAtStart: true
cluster:
  # Empty: one cluster. Otherwise where these pods run, when several clusters share the lease.
  name: ""
database:
  # Required: a Secret whose key secretKey holds the connection URL.
  existingSecret: ""
  secretKey: DATABASE_URL
  migrate: true
  schema: public
  table: pglease_leases
  preparedStatements: true
  tls:
    caSecret: ""
    caKey: ca.crt
    sslMode: verify-full
# The lease history's retention (pglease history); the leader prunes it every 10 minutes.
history:
  maxAge: 30d
  maxRowsPerKey: 1000
publish:
  roleLabel: pglease.io/role
  conditionType: pglease.io/leader
  fenceAnnotation: pglease.io/fence
  holderAnnotation: pglease.io/holder
  leaseAnnotation: pglease.io/lease
  # Empty: the sidecar's default, the pod's app.kubernetes.io/name and /instance labels.
  peerSelector: ""
podInfo:
  enabled: true
  mountPath: /etc/pglease
app:
  # The pod's token goes to the sidecar only; true mounts it into the application too.
  automountServiceAccountToken: false
serviceAccount:
  create: true
  # Empty: name.
  name: ""
  annotations: {}
rbac:
  create: true
# A ValidatingAdmissionPolicy holding the ServiceAccount to pglease's own label, annotations and
# condition on pods with every label of podLabels (the workload's selector): _admission-policy.tpl.
admissionPolicy:
  create: false
  podLabels: {}
{{- end }}

{{/*
The merged settings as JSON: include "pglease-sidecar.config" . | fromJson. The two settings that
name the workload's pods (publish.peerSelector, admissionPolicy.podLabels' values) are rendered
as templates of the caller's chart, so a values file can name the release in them as its
selector does (instance: "{{ .Release.Name }}").
*/}}
{{- define "pglease-sidecar.config" -}}
{{- /* A label's value is a string: a number went through JSON below and into the policy's CEL as
optional.of("1.2345678e+07"), a value no pod carries, so the policy refused every patch. */}}
{{- range $key, $value := dig "admissionPolicy" "podLabels" dict (.config | default dict) }}
{{- if not (kindIs "string" $value) }}
{{- $what := "not a string" }}
{{- if kindIs "bool" $value }}{{ $what = "a bool" }}{{ else if or (kindIs "float64" $value) (kindIs "int64" $value) (kindIs "int" $value) }}{{ $what = "a number" }}{{ end }}
{{- fail (printf "admissionPolicy.podLabels.%s: %s is %s, and a label value is a string; quote it: %s: '%s'" $key (toYaml $value) $what $key (toYaml $value)) }}
{{- end }}
{{- end }}
{{- $c := include "pglease-sidecar.merge" (list (include "pglease-sidecar.defaults" . | fromYaml) (.config | default dict)) | fromJson }}
{{- $_ := set $c.publish "peerSelector" (tpl (toString $c.publish.peerSelector) .context) }}
{{- $podLabels := dict }}
{{- range $key, $value := $c.admissionPolicy.podLabels }}
{{- $_ = set $podLabels $key (tpl (toString $value) $.context) }}
{{- end }}
{{- $_ = set $c.admissionPolicy "podLabels" $podLabels }}
{{- toJson $c }}
{{- end }}

{{/*
Maps merged key by key, the second list winning. Spelled out rather than mergeOverwrite, whose
handling of false and empty values has changed between Helm versions.
*/}}
{{- define "pglease-sidecar.merge" -}}
{{- $merged := deepCopy (index . 0) }}
{{- range $key, $value := index . 1 }}
{{- if and (kindIs "map" $value) (kindIs "map" (index $merged $key)) }}
{{- $_ := set $merged $key (include "pglease-sidecar.merge" (list (index $merged $key) $value) | fromJson) }}
{{- else }}
{{- $_ := set $merged $key $value }}
{{- end }}
{{- end }}
{{- toJson $merged }}
{{- end }}

{{- define "pglease-sidecar.serviceAccountName" -}}
{{- $c := include "pglease-sidecar.config" . | fromJson }}
{{- default $c.name $c.serviceAccount.name }}
{{- end }}

{{/*
A duration as Go writes it (15s, 1m30s, 1.5h, 300ms; d for days) in milliseconds, the syntax the
sidecar's parser takes (src/config/values.ts); the message names the key.
*/}}
{{- define "pglease-sidecar.durationMillis" -}}
{{- $key := index . 0 }}
{{- $value := toString (index . 1) }}
{{- if not (regexMatch "^(([0-9]+([.][0-9]*)?|[.][0-9]+)(ms|s|m|h|d))+$" $value) }}
{{- fail (printf "%s: %q is not a duration: write a number and a unit, or several as Go does (e.g. 500ms, 15s, 1m30s, 1.5h, 30d)" $key $value) }}
{{- end }}
{{- $unitMs := dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000 "d" 86400000 }}
{{- $total := 0.0 }}
{{- range regexFindAll "([0-9]+([.][0-9]*)?|[.][0-9]+)(ms|s|m|h|d)" $value -1 }}
{{- $number := regexFind "^[0-9.]+" . }}
{{- $total = addf $total (mulf (float64 $number) (index $unitMs (trimPrefix $number .))) }}
{{- end }}
{{- round $total 0 | int64 }}
{{- end }}
