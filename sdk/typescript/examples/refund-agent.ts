/**
 * An example agent over Node's http: a stub model decides a refund once
 * per event (a memoised step), then two tools run once each (effects): a
 * refund and an email. No dependencies.
 *
 *     node dist/examples/refund-agent.js LISTEN GATEWAY[,GATEWAY...] [REMOTE]
 *
 * LISTEN is host:port; GATEWAY the base URL of `seqbox serve` (several,
 * comma-separated, for serve processes sharing a database). Without
 * REMOTE the model and the tools are stubs in this process that print
 * what they do; with it (a base URL) they are HTTP calls to it (see
 * RemoteWorld), which is what the chaos harness and the tests serve.
 * @module
 */

import type { AddressInfo } from "node:net";
import { Agent } from "../src/index.js";
import { refundHandler } from "./refund-handler.js";
import { LocalWorld, RemoteWorld } from "./worlds.js";

const [listen, gateways, remote] = process.argv.slice(2);
if (!listen || !gateways) {
  console.error("usage: node refund-agent.js LISTEN GATEWAY[,GATEWAY...] [REMOTE]");
  process.exit(2);
}
const colon = listen.lastIndexOf(":");
const host = listen.slice(0, colon);
const world = remote ? new RemoteWorld(remote) : new LocalWorld();
const server = await new Agent(refundHandler(world), gateways.split(",")).serve(host, Number(listen.slice(colon + 1)));
console.log(`agent: listening on http://${host}:${(server.address() as AddressInfo).port}`);
