import pg from "pg";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createFenceGuard, type FenceGuard, StaleFenceError, withFence } from "../../src/fence/index.ts";
import { deferred, endPool, expectNoClientCheckedOut, usePoolFixture } from "./pool-fixture.ts";

const fx = usePoolFixture();
let guard: FenceGuard;

beforeAll(async () => {
  guard = createFenceGuard({ pool: fx.pool });
  await guard.migrate();
  await fx.pool.query(
    "CREATE TABLE orders (id serial PRIMARY KEY, resource text NOT NULL, fence bigint NOT NULL)",
  );
});

beforeEach(async () => {
  await fx.pool.query("TRUNCATE orders, public.pglease_fences");
});

async function recordOrder(client: pg.PoolClient, resource: string, fence: number): Promise<void> {
  await client.query("INSERT INTO orders (resource, fence) VALUES ($1, $2)", [resource, fence]);
}

async function orderFences(resource: string): Promise<number[]> {
  const { rows } = await fx.pool.query("SELECT fence FROM orders WHERE resource = $1 ORDER BY id", [
    resource,
  ]);
  return rows.map((r) => Number(r.fence));
}

describe("migration", () => {
  it("creates the table once when many replicas migrate at the same moment", async () => {
    await fx.pool.query("CREATE SCHEMA fenced");
    const pools = Array.from({ length: 6 }, () => new pg.Pool({ connectionString: fx.db.url, max: 1 }));
    try {
      await Promise.all(
        pools.map((pool) => createFenceGuard({ pool, schema: "fenced", table: "guards" }).migrate()),
      );
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
    const { rows } = await fx.pool.query(
      `SELECT column_name, data_type, is_nullable FROM information_schema.columns
       WHERE table_schema = 'fenced' AND table_name = 'guards' ORDER BY ordinal_position`,
    );
    expect(rows).toEqual([
      { column_name: "resource", data_type: "text", is_nullable: "NO" },
      { column_name: "fence", data_type: "bigint", is_nullable: "NO" },
      { column_name: "updated_at", data_type: "timestamp with time zone", is_nullable: "NO" },
    ]);
    const custom = createFenceGuard({ pool: fx.pool, schema: "fenced", table: "guards" });
    expect(custom.table).toBe('"fenced"."guards"');
    await custom.run("r", 3, async () => {});
    expect(await custom.current("r")).toBe(3);
    expect(await guard.current("r")).toBeNull();
  });

  it("names a missing schema instead of failing on CREATE TABLE", async () => {
    const g = createFenceGuard({ pool: fx.pool, schema: "nowhere" });
    await expect(g.migrate()).rejects.toThrow(/schema "nowhere" does not exist/);
  });

  it("says how to create the table when writing before any migration", async () => {
    const g = createFenceGuard({ pool: fx.pool, table: "never_migrated" });
    await expect(g.run("r", 1, async () => {})).rejects.toThrow(
      /"public"."never_migrated" does not exist.*migrate\(\)/,
    );
    await expect(g.current("r")).rejects.toThrow(/does not exist/);
  });

  it("refuses identifiers that would need more than quoting", () => {
    expect(() => createFenceGuard({ pool: fx.pool, schema: 'x"; DROP TABLE orders; --' })).toThrow(TypeError);
    expect(() => createFenceGuard({ pool: fx.pool, table: "1guards" })).toThrow(
      /table must be a plain PostgreSQL/,
    );
  });
});

describe("input validation", () => {
  it.each([0, -1, 1.5, Number.NaN, 2 ** 53, "3", null, undefined, 3n])(
    "rejects fence %s with a TypeError",
    async (bad) => {
      const fn = async () => {};
      await expect(guard.run("r", bad as number, fn)).rejects.toThrow(
        /fence must be a positive safe integer/,
      );
      await expect(guard.run("r", bad as number, fn)).rejects.toBeInstanceOf(TypeError);
    },
  );

  it("rejects an empty resource and bad options", async () => {
    await expect(guard.run("", 1, async () => {})).rejects.toThrow(/resource must be a non-empty string/);
    expect(() => createFenceGuard({ pool: fx.pool, lockTimeoutMs: 0 })).toThrow(/lockTimeoutMs/);
  });
});

describe("run", () => {
  it("rejects a stale writer with both fences named, without running its writes", async () => {
    await guard.run("orders", 5, (c) => recordOrder(c, "orders", 5));
    let ran = false;
    const error = await guard
      .run("orders", 4, async (c) => {
        ran = true;
        await recordOrder(c, "orders", 4);
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StaleFenceError);
    expect(error).toMatchObject({ resource: "orders", fence: 4, currentFence: 5, name: "StaleFenceError" });
    expect((error as Error).message).toMatch(/fence 4.*fence 5.*no longer the leader/);
    expect(ran).toBe(false);
    expect(await orderFences("orders")).toEqual([5]);
    expect(await guard.current("orders")).toBe(5);
  });

  it("names restarted lease fences as the likely cause only when the writer is far below", async () => {
    await guard.run("orders", 40, async () => {});
    const near = await guard.run("orders", 39, async () => {}).catch((e: unknown) => e);
    expect(near).toBeInstanceOf(StaleFenceError);
    expect((near as Error).message).not.toMatch(/restarted/);
    const far = await guard.run("orders", 3, async () => {}).catch((e: unknown) => e);
    expect(far).toMatchObject({ fence: 3, currentFence: 40 });
    expect((far as Error).message).toMatch(
      /fences restarted.*DELETE, TRUNCATE, DROP.*`pglease release`.*setval\('<schema>\.<table>_fence', 40\)/,
    );
  });

  it("lets an equal fence write many times, and a higher one advance", async () => {
    for (const fence of [2, 2, 2, 7, 7])
      await guard.run("orders", fence, (c) => recordOrder(c, "orders", fence));
    expect(await orderFences("orders")).toEqual([2, 2, 2, 7, 7]);
    expect(await guard.current("orders")).toBe(7);
  });

  it("keeps resources apart", async () => {
    await guard.run("a", 9, async () => {});
    await guard.run("b", 1, async () => {});
    expect([await guard.current("a"), await guard.current("b")]).toEqual([9, 1]);
  });

  it("returns the callback's value", async () => {
    expect(await guard.run("orders", 1, async (c) => (await c.query("SELECT 41 + 1 AS n")).rows[0].n)).toBe(
      42,
    );
  });

  it("rolls back the writes and the guard advance when the callback throws, and rethrows the same error", async () => {
    await guard.run("orders", 1, (c) => recordOrder(c, "orders", 1));
    const boom = new Error("boom");
    await expect(
      guard.run("orders", 2, async (c) => {
        await recordOrder(c, "orders", 2);
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(await orderFences("orders")).toEqual([1]);
    expect(await guard.current("orders")).toBe(1);
  });

  it("does not report success when the callback swallowed a failed statement", async () => {
    await expect(
      guard.run("orders", 1, async (c) => {
        await recordOrder(c, "orders", 1);
        await c.query("SELECT 1/0").catch(() => {});
      }),
    ).rejects.toThrow(/aborted the transaction and nothing was written/);
    expect(await orderFences("orders")).toEqual([]);
    expect(await guard.current("orders")).toBeNull();
  });

  it("refuses a callback that ends the transaction itself", async () => {
    await expect(
      guard.run("orders", 1, async (c) => {
        await c.query("ROLLBACK");
      }),
    ).rejects.toThrow(/ended the guard's transaction itself/);
  });

  it("destroys a client whose connection died inside the callback instead of pooling it", async () => {
    await guard.run("warm", 1, async () => {});
    const before = fx.pool.totalCount;
    const admin = new pg.Client({ connectionString: fx.db.url });
    await admin.connect();
    try {
      await expect(
        guard.run("orders", 1, async (c) => {
          const { rows } = await c.query("SELECT pg_backend_pid() AS pid");
          await admin.query("SELECT pg_terminate_backend($1)", [rows[0].pid]);
          await c.query("SELECT 1");
        }),
      ).rejects.toThrow();
    } finally {
      await admin.end();
    }
    expect(fx.pool.totalCount).toBe(before - 1);
    expectNoClientCheckedOut(fx.pool);
    expect(await guard.current("orders")).toBeNull();
  });

  it("serializes writers on one resource, and a bounded lock wait fails instead of hanging", async () => {
    const inside = deferred();
    const release = deferred();
    const first = guard.run("orders", 1, async (c) => {
      await recordOrder(c, "orders", 1);
      inside.resolve();
      await release.promise;
    });
    await inside.promise;
    const impatient = createFenceGuard({ pool: fx.pool, lockTimeoutMs: 50 });
    await expect(impatient.run("orders", 2, async () => {})).rejects.toMatchObject({ code: "55P03" });
    const patient = guard.run("orders", 2, (c) => recordOrder(c, "orders", 2));
    release.resolve();
    await Promise.all([first, patient]);
    expect(await orderFences("orders")).toEqual([1, 2]);
  });

  it("a writer paused inside its transaction holds the next leader up for idleInTransactionTimeoutMs at most, and writes nothing when it wakes", async () => {
    // A frozen leader (a stopped VM, SIGSTOP, a long pause) inside its fenced transaction keeps the
    // guard row locked; without a bound the next leader waits until it thaws, which may be never.
    const paused = createFenceGuard({ pool: fx.pool, idleInTransactionTimeoutMs: 300 });
    const inside = deferred();
    const wake = deferred();
    const first = paused.run("orders", 1, async (c) => {
      await recordOrder(c, "orders", 1);
      inside.resolve();
      await wake.promise;
      await recordOrder(c, "orders", 1);
    });
    const firstOutcome = first.then(
      () => "committed",
      (error: Error) => error,
    );
    await inside.promise;
    const next = guard.run("orders", 2, (c) => recordOrder(c, "orders", 2));
    const stuck = new Promise<string>((resolve) => setTimeout(() => resolve("still waiting"), 5_000).unref());
    try {
      expect(await Promise.race([next.then(() => "written"), stuck])).toBe("written");
    } finally {
      wake.resolve();
      await next;
    }
    const outcome = await firstOutcome;
    expect(outcome).toBeInstanceOf(Error);
    expect((outcome as Error).message).toMatch(
      /fence guard: PostgreSQL ended the transaction after it sat idle between statements for more than idleInTransactionTimeoutMs \(300 ms\)/,
    );
    expect((outcome as Error).message).toMatch(/nothing of it was written/);
    expect(await orderFences("orders")).toEqual([2]);
    expect(await guard.current("orders")).toBe(2);
  });

  // The idle timeout explains why nothing was written; what the callback threw stays its cause.
  it("an idle timeout's error keeps the callback's own error", async () => {
    const paused = createFenceGuard({ pool: fx.pool, idleInTransactionTimeoutMs: 200 });
    const outcome = await paused
      .run("orders", 1, async (c) => {
        await recordOrder(c, "orders", 1);
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        throw new Error("payments API: 503");
      })
      .catch((error: Error) => error);
    expect(outcome.message).toMatch(/idleInTransactionTimeoutMs \(200 ms\)/);
    const chain: unknown[] = [];
    for (let e: unknown = outcome; e instanceof Error; e = e.cause) chain.push(e.message);
    expect(chain.join(" <- ")).toMatch(/payments API: 503/);
  });

  it("bounds a guard transaction's idle time at 10 s by default or a shorter bound in force; a value of its own or 0 (no bound) when given", async () => {
    const setting = (g: FenceGuard) =>
      g.run("orders", 1, async (c) => {
        const { rows } = await c.query("SHOW idle_in_transaction_session_timeout");
        return rows[0].idle_in_transaction_session_timeout as string;
      });
    expect(await setting(guard)).toBe("10s");
    expect(await setting(createFenceGuard({ pool: fx.pool, idleInTransactionTimeoutMs: 2500 }))).toBe(
      "2500ms",
    );
    expect(await setting(createFenceGuard({ pool: fx.pool, idleInTransactionTimeoutMs: 0 }))).toBe("0");
    // Transaction-local: the connection goes back to the pool with the session's own value.
    const { rows } = await fx.pool.query("SHOW idle_in_transaction_session_timeout");
    expect(rows[0].idle_in_transaction_session_timeout).toBe("0");
    // The default never loosens a shorter bound already in force (here the session's; a role's or a
    // database's comes the same way); a longer one it tightens; a value given is set as is.
    for (const [session, byDefault] of [
      ["1s", "1s"],
      ["30s", "10s"],
    ]) {
      const strict = new pg.Pool({
        connectionString: fx.db.url,
        max: 1,
        options: `-c idle_in_transaction_session_timeout=${session}`,
      });
      try {
        expect(await setting(createFenceGuard({ pool: strict }))).toBe(byDefault);
        expect(await setting(createFenceGuard({ pool: strict, idleInTransactionTimeoutMs: 2500 }))).toBe(
          "2500ms",
        );
        expect(
          (await strict.query("SHOW idle_in_transaction_session_timeout")).rows[0]
            .idle_in_transaction_session_timeout,
        ).toBe(session);
      } finally {
        await endPool(strict);
      }
    }
    for (const bad of [-1, 1.5, Number.NaN, "10s", 2 ** 31]) {
      expect(() => createFenceGuard({ pool: fx.pool, idleInTransactionTimeoutMs: bad as number })).toThrow(
        /idleInTransactionTimeoutMs must be a whole number of milliseconds \(0 for no bound\), at most 2147483647/,
      );
    }
  });

  it("withFence uses the default table", async () => {
    await withFence(fx.pool, { resource: "orders", fence: 3 }, (c) => recordOrder(c, "orders", 3));
    await expect(withFence(fx.pool, { resource: "orders", fence: 2 }, async () => {})).rejects.toBeInstanceOf(
      StaleFenceError,
    );
    const { rows } = await fx.pool.query("SELECT fence FROM public.pglease_fences WHERE resource = 'orders'");
    expect(rows).toEqual([{ fence: "3" }]);
  });
});
