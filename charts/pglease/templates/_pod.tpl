{{/* The pod template shared by the Deployment and the StatefulSet. */}}
{{- define "pglease.podTemplate" -}}
{{- $v := .Values -}}
metadata:
  labels:
    {{- include "pglease.selectorLabels" . | nindent 4 }}
    {{- with $v.workload.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- $annotations := deepCopy $v.workload.podAnnotations }}
  {{- /* A changed database Secret the chart owns rolls the pods. */}}
  {{- if $v.database.url }}
  {{- $_ := set $annotations "checksum/database" (include (print $.Template.BasePath "/database-secret.yaml") . | sha256sum) }}
  {{- end }}
  {{- with $annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "pglease.serviceAccountName" . }}
  automountServiceAccountToken: true
  terminationGracePeriodSeconds: {{ $v.workload.terminationGracePeriodSeconds }}
  securityContext:
    {{- toYaml $v.workload.podSecurityContext | nindent 4 }}
  {{- if $v.readinessGate.enabled }}
  readinessGates:
    - conditionType: {{ $v.publish.conditionType | quote }}
  {{- end }}
  {{- with $v.workload.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.workload.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with $v.workload.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.workload.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.workload.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.workload.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if or $v.sidecar.native $v.workload.initContainers }}
  initContainers:
    {{- if $v.sidecar.native }}
    {{- include "pglease.sidecarContainer" . | nindent 4 }}
    {{- end }}
    {{- with $v.workload.initContainers }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
  containers:
    {{- include "pglease.appContainer" . | nindent 4 }}
    {{- if not $v.sidecar.native }}
    {{- include "pglease.sidecarContainer" . | nindent 4 }}
    {{- end }}
  volumes:
    - name: pglease-tmp
      emptyDir:
        sizeLimit: 16Mi
    - name: app-tmp
      emptyDir: {}
    {{- if $v.podInfo.enabled }}
    - name: pglease-podinfo
      downwardAPI:
        items:
          - path: role
            fieldRef:
              fieldPath: {{ printf "metadata.labels['%s']" $v.publish.roleLabel | quote }}
          - path: fence
            fieldRef:
              fieldPath: {{ printf "metadata.annotations['%s']" $v.publish.fenceAnnotation | quote }}
          - path: holder
            fieldRef:
              fieldPath: {{ printf "metadata.annotations['%s']" $v.publish.holderAnnotation | quote }}
          - path: lease
            fieldRef:
              fieldPath: {{ printf "metadata.annotations['%s']" $v.publish.leaseAnnotation | quote }}
    {{- end }}
    {{- if $v.database.tls.caSecret }}
    - name: pglease-database-ca
      secret:
        secretName: {{ $v.database.tls.caSecret }}
        items:
          - key: {{ $v.database.tls.caKey }}
            path: ca.crt
    {{- end }}
    {{- with $v.workload.volumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{- define "pglease.appContainer" -}}
{{- $v := .Values -}}
{{- $app := $v.app -}}
- name: {{ $app.name }}
  image: {{ printf "%s:%s" $app.image.repository $app.image.tag | quote }}
  imagePullPolicy: {{ $app.image.pullPolicy }}
  {{- with $app.command }}
  command:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $app.args }}
  args:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  env:
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    {{- /* The sidecar shares the pod's network: its status (fence included) is on localhost. */}}
    - name: LEADER_STATUS_URL
      value: {{ printf "http://127.0.0.1:%d/status" (int $v.sidecar.httpPort) | quote }}
    {{- if $v.podInfo.enabled }}
    - name: LEADER_INFO_DIR
      value: {{ $v.podInfo.mountPath | quote }}
    {{- end }}
    {{- with $app.env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $app.envFrom }}
  envFrom:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $app.ports }}
  ports:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $app.livenessProbe }}
  livenessProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $app.readinessProbe }}
  readinessProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $app.startupProbe }}
  startupProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $app.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $app.securityContext | nindent 4 }}
  volumeMounts:
    - name: app-tmp
      mountPath: /tmp
    {{- if $v.podInfo.enabled }}
    - name: pglease-podinfo
      mountPath: {{ $v.podInfo.mountPath }}
      readOnly: true
    {{- end }}
    {{- with $app.volumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{- define "pglease.sidecarContainer" -}}
{{- $v := .Values -}}
{{- $sidecar := $v.sidecar -}}
- name: {{ $sidecar.name }}
  image: {{ include "pglease.sidecarImage" . | quote }}
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
      containerPort: {{ $sidecar.httpPort }}
      protocol: TCP
  env:
    {{- include "pglease.sidecarEnv" . | nindent 4 }}
    {{- with $sidecar.extraEnv }}
    {{- toYaml . | nindent 4 }}
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
    {{- if $v.database.tls.caSecret }}
    - name: pglease-database-ca
      mountPath: /etc/pglease-database-ca
      readOnly: true
    {{- end }}
{{- end }}

{{/* The sidecar's settings, in the PGLEASE_* form of its flags. */}}
{{- define "pglease.sidecarEnv" -}}
{{- $v := .Values -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "pglease.databaseSecretName" . }}
      key: {{ $v.database.secretKey | quote }}
{{- if $v.database.tls.caSecret }}
- name: PGSSLROOTCERT
  value: /etc/pglease-database-ca/ca.crt
- name: PGSSLMODE
  value: {{ $v.database.tls.sslMode | quote }}
{{- end }}
- name: PGLEASE_LEASE
  value: {{ include "pglease.leaseNames" . | quote }}
- name: PGLEASE_DURATION
  value: {{ $v.lease.duration | quote }}
{{- with $v.lease.renewInterval }}
- name: PGLEASE_RENEW_INTERVAL
  value: {{ . | quote }}
{{- end }}
- name: PGLEASE_RETRY_INTERVAL
  value: {{ $v.lease.retryInterval | quote }}
- name: PGLEASE_GRACE_PERIOD
  value: {{ $v.lease.gracePeriod | quote }}
- name: PGLEASE_NOTIFY
  value: {{ $v.lease.notify | quote }}
- name: PGLEASE_HTTP_ADDR
  value: {{ printf "0.0.0.0:%d" (int $v.sidecar.httpPort) | quote }}
- name: PGLEASE_LOG_LEVEL
  value: {{ $v.sidecar.logLevel | quote }}
- name: PGLEASE_MIGRATE
  value: {{ $v.database.migrate | quote }}
- name: PGLEASE_SCHEMA
  value: {{ $v.database.schema | quote }}
- name: PGLEASE_TABLE
  value: {{ $v.database.table | quote }}
- name: PGLEASE_PREPARED_STATEMENTS
  value: {{ $v.database.preparedStatements | quote }}
- name: PGLEASE_ROLE_LABEL
  value: {{ $v.publish.roleLabel | quote }}
- name: PGLEASE_CONDITION_TYPE
  value: {{ $v.publish.conditionType | quote }}
- name: PGLEASE_FENCE_ANNOTATION
  value: {{ $v.publish.fenceAnnotation | quote }}
- name: PGLEASE_HOLDER_ANNOTATION
  value: {{ $v.publish.holderAnnotation | quote }}
- name: PGLEASE_LEASE_ANNOTATION
  value: {{ $v.publish.leaseAnnotation | quote }}
- name: PGLEASE_PEER_SELECTOR
  value: {{ default (include "pglease.selectorString" .) $v.publish.peerSelector | quote }}
{{- end }}
