{{/*
The sidecar container, one list item: put it under initContainers when sidecar.native (a native
sidecar, Kubernetes >= 1.29: started before the application, stopped after it), else under
containers.
*/}}
{{- define "pglease-sidecar.container" -}}
{{- include "pglease-sidecar.validate" . }}
{{- $c := include "pglease-sidecar.config" . | fromJson }}
{{- $sidecar := $c.sidecar -}}
- name: {{ $sidecar.name }}
  image: {{ printf "%s:%s" $sidecar.image.repository (toString $sidecar.image.tag) | quote }}
  imagePullPolicy: {{ $sidecar.image.pullPolicy }}
  {{- if $sidecar.native }}
  # A native sidecar: started before the application, stopped after it.
  restartPolicy: Always
  {{- end }}
  args:
    - run
    {{- with $sidecar.extraArgs }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: pglease
      containerPort: {{ int $sidecar.httpPort }}
      protocol: TCP
  env:
    {{- include "pglease-sidecar.env" $c | nindent 4 }}
    {{- with $sidecar.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $sidecar.startupProbe }}
  # It answers "starting" from its first moment; the budget outlasts sidecar.startTimeout, so
  # pglease's own start-up deadline, with its message, always comes first.
  startupProbe:
    {{- toYaml (include "pglease-sidecar.startupProbe" $c | fromJson) | nindent 4 }}
  {{- end }}
  {{- with $sidecar.livenessProbe }}
  livenessProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $sidecar.readinessProbe }}
  readinessProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $sidecar.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $sidecar.securityContext | nindent 4 }}
  volumeMounts:
    - name: pglease-tmp
      mountPath: /tmp
    # The pod's token, here only (the pod does not automount it into every container).
    - name: pglease-api-access
      mountPath: /var/run/secrets/kubernetes.io/serviceaccount
      readOnly: true
    {{- if $c.database.tls.caSecret }}
    - name: pglease-database-ca
      mountPath: /etc/pglease-database-ca
      readOnly: true
    {{- end }}
{{- end }}

{{/* Seconds the startup probe waits at most: the start timeout and this margin for Node to start. */}}
{{- define "pglease-sidecar.startupMarginSeconds" -}}30{{- end }}

{{/* sidecar.startupProbe with failureThreshold derived from sidecar.startTimeout when not set. */}}
{{- define "pglease-sidecar.startupProbe" -}}
{{- $probe := deepCopy .sidecar.startupProbe }}
{{- if not (hasKey $probe "failureThreshold") }}
{{- $budgetMs := add (include "pglease-sidecar.durationMillis" (list "sidecar.startTimeout" .sidecar.startTimeout) | int64) (mul (include "pglease-sidecar.startupMarginSeconds" . | int64) 1000) }}
{{- $periodMs := mul (int64 (default 10 $probe.periodSeconds)) 1000 }}
{{- $_ := set $probe "failureThreshold" (div (sub (add $budgetMs $periodMs) 1) $periodMs) }}
{{- end }}
{{- toJson $probe }}
{{- end }}

{{/* The sidecar's settings, in the PGLEASE_* form of its flags; takes the merged settings. */}}
{{- define "pglease-sidecar.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- /* Scopes the restart lock to this pod: a pod recreated under the same name is another pod. */}}
- name: POD_UID
  valueFrom:
    fieldRef:
      fieldPath: metadata.uid
{{- /* The pod's revision (a Deployment's or a StatefulSet's; the other is empty): a stopping leader hands over to a pod of the newest one. */}}
- name: POD_TEMPLATE_HASH
  valueFrom:
    fieldRef:
      fieldPath: metadata.labels['pod-template-hash']
- name: CONTROLLER_REVISION_HASH
  valueFrom:
    fieldRef:
      fieldPath: metadata.labels['controller-revision-hash']
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .database.existingSecret }}
      key: {{ .database.secretKey | quote }}
{{- if .database.tls.caSecret }}
- name: PGSSLROOTCERT
  value: /etc/pglease-database-ca/ca.crt
- name: PGSSLMODE
  value: {{ .database.tls.sslMode | quote }}
{{- end }}
- name: PGLEASE_LEASE
  value: {{ prepend .lease.additional (default .name .lease.name) | join "," | quote }}
- name: PGLEASE_DURATION
  value: {{ .lease.duration | quote }}
{{- with .lease.renewInterval }}
- name: PGLEASE_RENEW_INTERVAL
  value: {{ . | quote }}
{{- end }}
- name: PGLEASE_RETRY_INTERVAL
  value: {{ .lease.retryInterval | quote }}
- name: PGLEASE_GRACE_PERIOD
  value: {{ .lease.gracePeriod | quote }}
- name: PGLEASE_START_TIMEOUT
  value: {{ .sidecar.startTimeout | quote }}
- name: PGLEASE_NOTIFY
  value: {{ .lease.notify | quote }}
- name: PGLEASE_RESTART_TAKEOVER
  value: {{ .lease.restartTakeover | quote }}
- name: PGLEASE_SESSION_TAKEOVER
  value: {{ .lease.sessionTakeover | quote }}
- name: PGLEASE_CRASH_TAKEOVER
  value: {{ .lease.crashTakeover | quote }}
- name: PGLEASE_HEALTH_GATE
  value: {{ .health.gate | quote }}
- name: PGLEASE_SIDECAR_CONTAINER
  value: {{ .sidecar.name | quote }}
{{- with .health.appContainers }}
- name: PGLEASE_APP_CONTAINERS
  value: {{ join "," . | quote }}
{{- end }}
{{- with .health.url }}
- name: PGLEASE_HEALTH_URL
  value: {{ . | quote }}
{{- end }}
- name: PGLEASE_HEALTH_GRACE
  value: {{ .health.grace | quote }}
- name: PGLEASE_HEALTH_SETTLE
  value: {{ .health.settle | quote }}
- name: PGLEASE_HEALTH_STRICT
  value: {{ .health.strict | quote }}
- name: PGLEASE_HEALTH_WAIT
  value: {{ .health.waitAtStart | quote }}
{{- with .cluster.name }}
- name: PGLEASE_CLUSTER_NAME
  value: {{ . | quote }}
{{- end }}
- name: PGLEASE_PRIORITY
  value: {{ .lease.priority | quote }}
- name: PGLEASE_PREEMPT
  value: {{ .lease.preempt | quote }}
- name: PGLEASE_NO_LEAD
  value: {{ .lease.noLead | quote }}
{{- /* Only the port: the host is the sidecar's default (every address). */}}
- name: PGLEASE_HTTP_ADDR
  value: {{ printf ":%d" (int .sidecar.httpPort) | quote }}
- name: PGLEASE_LOG_LEVEL
  value: {{ .sidecar.logLevel | quote }}
- name: PGLEASE_MIGRATE
  value: {{ .database.migrate | quote }}
- name: PGLEASE_SCHEMA
  value: {{ .database.schema | quote }}
- name: PGLEASE_TABLE
  value: {{ .database.table | quote }}
- name: PGLEASE_PREPARED_STATEMENTS
  value: {{ .database.preparedStatements | quote }}
- name: PGLEASE_HISTORY_MAX_AGE
  value: {{ .history.maxAge | quote }}
- name: PGLEASE_HISTORY_MAX_ROWS
  value: {{ .history.maxRowsPerKey | int64 | quote }}
- name: PGLEASE_ROLE_LABEL
  value: {{ .publish.roleLabel | quote }}
- name: PGLEASE_CONDITION_TYPE
  value: {{ .publish.conditionType | quote }}
- name: PGLEASE_FENCE_ANNOTATION
  value: {{ .publish.fenceAnnotation | quote }}
- name: PGLEASE_HOLDER_ANNOTATION
  value: {{ .publish.holderAnnotation | quote }}
- name: PGLEASE_LEASE_ANNOTATION
  value: {{ .publish.leaseAnnotation | quote }}
{{- with .publish.peerSelector }}
- name: PGLEASE_PEER_SELECTOR
  value: {{ . | quote }}
{{- end }}
{{- end }}
