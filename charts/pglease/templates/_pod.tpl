{{/* The pod template shared by the Deployment and the StatefulSet. */}}
{{- define "pglease.podTemplate" -}}
{{- $v := .Values -}}
{{- $sidecar := dict "context" . "config" (include "pglease.sidecarConfig" . | fromJson) -}}
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
  {{- include "pglease-sidecar.podSpec" $sidecar | nindent 2 }}
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
  {{- else }}
  {{- if $v.workload.spreadAcrossNodes }}
  # Two candidates on one node fail over nothing when that node goes: spread them, softly, so
  # a cluster with fewer nodes than replicas still schedules them all.
  topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: kubernetes.io/hostname
      whenUnsatisfiable: ScheduleAnyway
      labelSelector:
        matchLabels:
          {{- include "pglease.selectorLabels" . | nindent 10 }}
  {{- end }}
  {{- end }}
  {{- if or $v.sidecar.native $v.workload.initContainers }}
  initContainers:
    {{- if $v.sidecar.native }}
    {{- include "pglease-sidecar.container" $sidecar | nindent 4 }}
    {{- end }}
    {{- with $v.workload.initContainers }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
  containers:
    {{- include "pglease.appContainer" (dict "root" . "sidecar" $sidecar) | nindent 4 }}
    {{- if not $v.sidecar.native }}
    {{- include "pglease-sidecar.container" $sidecar | nindent 4 }}
    {{- end }}
  volumes:
    - name: app-tmp
      emptyDir: {}
    {{- include "pglease-sidecar.volumes" $sidecar | nindent 4 }}
    {{- with $v.workload.volumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/* The application container; takes (dict "root" $ "sidecar" <the library's arguments>). */}}
{{- define "pglease.appContainer" -}}
{{- $v := .root.Values -}}
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
    {{- include "pglease-sidecar.appEnv" .sidecar | nindent 4 }}
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
    {{- with include "pglease-sidecar.appVolumeMounts" .sidecar }}
    {{- . | nindent 4 }}
    {{- end }}
    {{- with $app.volumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}
