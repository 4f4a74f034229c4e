export { createPriceTable, parseModelPrices, sumUsd } from './prices.js';
export type { ModelPrice, PriceTable } from './prices.js';
