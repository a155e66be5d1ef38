// npm run cluster -- up|down|status|images: the single-node cluster by hand (the suites use node.ts).
// `down --check` (CI's last cluster step) also fails when anything of the node is left behind.
import { buildImage, importImage } from "./images.ts";
import { paths } from "./layout.ts";
import { down, leftovers, status, up } from "./node.ts";
import { clusterTools } from "./tools.ts";

const usage = "usage: npm run cluster -- up|down [--check]|status|images";

async function main(command: string | undefined, flags: string[]): Promise<number> {
  switch (command) {
    case "up": {
      const report = await up();
      console.log(`node Ready ${report.bootMs} ms after the first component started`);
      for (const [component, log] of Object.entries(report.logs))
        console.log(`${component.padEnd(24)} ${log}`);
      console.log(`kubectl --kubeconfig ${paths.adminKubeconfig} get pods -A`);
      return 0;
    }
    case "down": {
      const report = await down();
      let failed = Boolean(report.guardDrops);
      if (report.guardDrops)
        console.error(`cluster: the host guard dropped ${report.guardDrops} packets of 10.213.0.0/16`);
      if (report.sysctlsNotRestored.length) {
        failed = true;
        console.error(`cluster: host sysctls not restored: ${report.sysctlsNotRestored.join(", ")}`);
      }
      if (flags.includes("--check")) {
        const left = await leftovers();
        for (const line of left) console.error(`cluster: left behind: ${line}`);
        if (left.length) failed = true;
        else console.log("nothing of the cluster is left on this machine");
      }
      return failed ? 1 : 0;
    }
    case "status":
      console.log(await status());
      return 0;
    case "images": {
      const tools = await clusterTools();
      for (const name of ["pause", "pglease"] as const) {
        const image = await buildImage(name);
        await importImage(tools, image);
        console.log(`${image.reference} (${image.buildMs} ms) imported from ${image.archive}`);
      }
      return 0;
    }
    default:
      console.error(usage);
      return 2;
  }
}

main(process.argv[2], process.argv.slice(3)).then(
  (code) => process.exit(code),
  (error: Error) => {
    console.error(`cluster: ${error.message}`);
    process.exit(1);
  },
);
