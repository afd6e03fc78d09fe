package alerts

// DeliveriesSQL is the silence's query, for its plan's test.
const DeliveriesSQL = deliveriesSQL
