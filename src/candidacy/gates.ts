// Several reasons not to lead, asked as one gate: the application's own, a handover, no-lead mode.
import type { CampaignGate } from "../election/campaign-gate.ts";

/** Closed while any gate is closed; the first closed one's reason is the reason. */
export function allGates(gates: readonly CampaignGate[]): CampaignGate {
  return {
    reasonNotToLead() {
      for (const gate of gates) {
        const reason = gate.reasonNotToLead();
        if (reason !== null) return reason;
      }
      return null;
    },
    subscribe(changed) {
      const unsubscribes = gates.map((gate) => gate.subscribe(changed));
      return () => {
        for (const unsubscribe of unsubscribes) unsubscribe();
      };
    },
  };
}
