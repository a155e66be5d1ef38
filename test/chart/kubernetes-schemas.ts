// Validates Kubernetes manifests offline against the API's JSON schemas. kubernetes-models ships
// ajv-compiled validators generated from the Kubernetes OpenAPI document (and
// @kubernetes-models/prometheus-operator those of the monitoring CRDs): types, enums, required
// fields, int-or-string, quantities. No kube-apiserver and no kubeconform binary exist here.
// Those schemas let unknown fields through; ./unknown-fields.ts catches them.
import {
  PrometheusRule,
  ServiceMonitor,
} from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import {
  ValidatingAdmissionPolicy,
  ValidatingAdmissionPolicyBinding,
} from "kubernetes-models/admissionregistration.k8s.io/v1";
import { Deployment, StatefulSet } from "kubernetes-models/apps/v1";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { Role, RoleBinding } from "kubernetes-models/rbac.authorization.k8s.io/v1";
import { ConfigMap, Pod, Secret, Service, ServiceAccount } from "kubernetes-models/v1";
import { parseAllDocuments } from "yaml";

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown };
  [key: string]: unknown;
}

interface Validating {
  validate(): void;
}
type ModelClass = new (data: never) => Validating;

// Every kind the chart and deploy/ produce; a kind missing here is reported, never skipped.
const models = new Map<string, ModelClass>([
  ["apps/v1 Deployment", Deployment],
  ["apps/v1 StatefulSet", StatefulSet],
  ["v1 Pod", Pod],
  ["v1 Service", Service],
  ["v1 ServiceAccount", ServiceAccount],
  ["v1 Secret", Secret],
  ["v1 ConfigMap", ConfigMap],
  ["policy/v1 PodDisruptionBudget", PodDisruptionBudget],
  ["networking.k8s.io/v1 NetworkPolicy", NetworkPolicy],
  ["rbac.authorization.k8s.io/v1 Role", Role],
  ["rbac.authorization.k8s.io/v1 RoleBinding", RoleBinding],
  ["monitoring.coreos.com/v1 ServiceMonitor", ServiceMonitor],
  ["monitoring.coreos.com/v1 PrometheusRule", PrometheusRule],
  ["admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy", ValidatingAdmissionPolicy],
  ["admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding", ValidatingAdmissionPolicyBinding],
]);

/** Parses a multi-document YAML stream; duplicate keys and syntax errors throw. */
export function parseManifests(text: string, source: string): Manifest[] {
  const manifests: Manifest[] = [];
  for (const document of parseAllDocuments(text, { uniqueKeys: true })) {
    if (document.errors.length > 0) {
      throw new Error(`${source}: ${document.errors.map((e) => e.message).join("; ")}`);
    }
    const value: unknown = document.toJS();
    if (value === null || value === undefined) continue;
    if (typeof value !== "object" || Array.isArray(value)) {
      throw new Error(
        `${source}: a document is not a Kubernetes object: ${JSON.stringify(value).slice(0, 80)}`,
      );
    }
    manifests.push(value as Manifest);
  }
  return manifests;
}

/** Problems of one manifest against its kind's schema; empty when it is valid. */
export function schemaProblems(manifest: Manifest): string[] {
  const where = `${manifest.kind ?? "?"}/${manifest.metadata?.name ?? "?"}`;
  const Model = models.get(`${manifest.apiVersion} ${manifest.kind}`);
  if (Model === undefined) {
    return [`${where}: no schema for apiVersion ${manifest.apiVersion} kind ${manifest.kind}`];
  }
  try {
    new Model(manifest as never).validate();
    return [];
  } catch (error) {
    return [`${where}: ${error instanceof Error ? error.message : String(error)}`];
  }
}
